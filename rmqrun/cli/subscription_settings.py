"""Which topics ``rmqrun run`` subscribes to, and with what, from the resolved settings.

``topic`` with ``tags`` or ``sql`` (one topic), ``subscriptions`` (several, each with its tags) or repeated
``--topic T[:TAGS]`` flags; what to do when more than one is given (the stronger source wins, the same source
twice is refused), and the expression type of each subscription (a tag expression unless ``sql`` made it an
SQL92 selector). :mod:`rmqrun.cli.settings` resolves the values and builds the consumer's config from these.
"""

from __future__ import annotations

from typing import Any, Mapping, Protocol

from rmqrun.cli.values import split_subscription
from rmqrun.errors import ConfigError
from rmqrun.protocol.subscription import EXPRESSION_SQL92


class Resolved(Protocol):
    """What is read here of :class:`rmqrun.cli.settings.Resolved`: each setting's value and where it came from."""

    values: Mapping[str, Any]
    sources: Mapping[str, str]


def split_topic_flags(cli: Mapping[str, Any]) -> dict[str, Any]:
    """Repeated ``--topic`` flags (a tuple from click): one plain topic stays ``topic``; several, or
    one with its own ``:TAGS``, become ``subscriptions``. The same topic twice is refused."""
    out = dict(cli)
    given = out.get("topic")
    if not isinstance(given, (tuple, list)):
        return out
    out["topic"] = None
    if not given:
        return out
    subs: dict[str, str | None] = {}
    for item in given:
        try:
            topic, tags = split_subscription(str(item))
        except ValueError as exc:
            raise ConfigError(f"topic={item!r} (command line --topic) is invalid: {exc}") from None
        if topic in subs:
            raise ConfigError(f"--topic {topic} is given twice: give each topic once, with all its tags "
                              "(--topic T:'TagA || TagB')")
        subs[topic] = tags
    if len(subs) == 1 and next(iter(subs.values())) is None:
        out["topic"] = next(iter(subs))
        return out
    if out.get("subscriptions") is not None:
        raise ConfigError("give --topic or subscriptions, not both")
    out["subscriptions"] = {t: ("*" if tags is None else tags) for t, tags in subs.items()}
    return out


_RANK = ("default", "config file", "environment", "command line")


def _rank(source: str) -> int:
    """Where a value came from, as a precedence rank (higher wins)."""
    return max((i for i, prefix in enumerate(_RANK) if source.startswith(prefix)), default=0)


def subscriptions_of(resolved: Resolved) -> dict[str, str] | None:
    """Topic -> tag expression from ``topic``/``tags`` or ``subscriptions``, whichever comes from the
    stronger source (command line > environment > config file); None when neither is set. With ``sql``
    (:func:`_uses_sql`) the one topic's value is its SQL92 selector (:func:`sql_topics` says which).

    Refused where it would be ambiguous: both from the same source, or ``tags`` beside several topics
    (each topic carries its own tags there)."""
    v, src = resolved.values, resolved.sources
    subs, topic = v.get("subscriptions"), v.get("topic")
    if _uses_sql(resolved):
        return _sql_subscription(resolved)
    if subs and topic:
        a, b = _rank(src["subscriptions"]), _rank(src["topic"])
        if a == b:
            raise ConfigError(f"topic ({src['topic']}) and subscriptions ({src['subscriptions']}) are both set: "
                              "give one (subscriptions for several topics)")
        if b > a:
            subs = None
    if not subs:
        return {topic: v["tags"]} if topic else None
    if src.get("tags", "default") != "default" and _rank(src["tags"]) >= _rank(src["subscriptions"]):
        raise ConfigError(f"tags ({src['tags']}) cannot be combined with several topics "
                          f"(subscriptions from {src['subscriptions']}): give each topic its own tags, "
                          "e.g. --topic Orders:'TagA || TagB' --topic Audit")
    return dict(subs)


def _uses_sql(resolved: Resolved) -> bool:
    """Whether the topic is subscribed by its ``sql`` selector rather than ``tags``: a topic takes one of them
    (Java subscribes with a tag expression or a MessageSelector), so when both are set the stronger source wins
    (command line > environment > config file) and the same source twice is refused. Tags of ``*`` (every tag,
    as config/example.yaml writes them) filter nothing: the selector goes with them."""
    v, src = resolved.values, resolved.sources
    if v.get("sql") is None:
        return False
    tags_from = src.get("tags", "default")
    if tags_from == "default" or v.get("tags") == "*" or _rank(src["sql"]) > _rank(tags_from):  # '*': no filter
        return True
    if _rank(src["sql"]) == _rank(tags_from):
        raise ConfigError(f"sql ({src['sql']}) and tags ({tags_from}) are both set: a topic is subscribed with "
                          "one of them")
    return False


def _sql_subscription(resolved: Resolved) -> dict[str, str]:
    """``{topic: sql}``: the selector of the one topic. Refused beside several topics (``subscriptions``, or
    repeated ``--topic``), whose tags it would silently replace."""
    v, src = resolved.values, resolved.sources
    if v.get("subscriptions"):
        raise ConfigError(f"sql ({src['sql']}) goes with one topic (topic / --topic), not with several "
                          f"(subscriptions from {src['subscriptions']})")
    if not v.get("topic"):
        return {}
    return {v["topic"]: v["sql"]}


def sql_topics(resolved: Resolved) -> dict[str, str]:
    """Topic -> expression type of the subscriptions that are not tag expressions (``sql``: SQL92)."""
    topic = resolved.values.get("topic")
    return {topic: EXPRESSION_SQL92} if topic and _uses_sql(resolved) else {}
