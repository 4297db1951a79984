"""Namespaces: how a topic or group name is put under an instance namespace, and taken out again.

Managed RocketMQ services (and any cluster shared by tenants) give every
client a namespace (an instance id) and expect every topic and group on the
wire to carry it: ``ns%Orders``, group ``ns%Scoring``, its retry topic
``%RETRY%ns%Scoring`` and dead-letter topic ``%DLQ%ns%Scoring``. The Java
client (``NamespaceUtil``, ``ClientConfig.withNamespace``) wraps names on the
way out and unwraps them before a listener sees a message; rmqrun follows the
same rules so that its clients and Java's name the same resources:

* the ``%RETRY%`` / ``%DLQ%`` prefix stays in front: the namespace goes after it;
* system topics (``TBW102``, ``SCHEDULE_TOPIC_XXXX``, ``rmq_sys_*`` ...) and
  system groups (``CID_RMQ_SYS_*``) are never wrapped (which names those are, and
  how a retry or DLQ topic is named, is :mod:`rmqrun.topic_names`'s);
* a name that already carries this namespace is left alone, so wrapping twice
  is harmless (a retry topic read back from a message property is already
  wrapped);
* unwrapping removes only this namespace: another tenant's ``other%T`` stays
  as it is.

An empty or missing namespace changes nothing anywhere: every function here is
the identity then, so callers need no special case.
"""

from __future__ import annotations

import re

from rmqrun.model import MessageQueue
from rmqrun.topic_names import DLQ_TOPIC_PREFIX, RETRY_TOPIC_PREFIX, is_system_group, is_system_topic

#: what separates the namespace from the name (``ns%Orders``)
SEPARATOR = "%"
#: RocketMQ's longest topic name; a wrapped name must fit too
MAX_NAME_LENGTH = 127
#: RocketMQ's longest consumer group name (Java's ``Validators.checkGroup``: 255, where a topic has 127); one
#: limit for every command that takes a group, so a group ``read --group`` accepts is one ``run`` accepts too
MAX_GROUP_LENGTH = 255

_NAMESPACE_RE = re.compile(r"^[A-Za-z0-9_-]+$")


def check_namespace(value: str | None) -> str | None:
    """The namespace to use (None for none), or ValueError saying what a namespace may hold.

    ``%`` cannot be part of it (it is the separator, so the name could not be
    unwrapped again), nor ``|`` (reserved by RocketMQ names for other uses).
    """
    if value is None:
        return None
    text = str(value).strip()
    if not text:
        return None
    if len(text) >= MAX_NAME_LENGTH or not _NAMESPACE_RE.match(text):
        raise ValueError("a namespace holds letters, digits, '_' and '-' only (no '%'), "
                         f"fewer than {MAX_NAME_LENGTH} characters, e.g. MQ_INST_1234_abcd")
    return text


def is_system(name: str) -> bool:
    """A broker-owned topic or group, which no namespace applies to."""
    return is_system_topic(name) or is_system_group(name)


def split_prefix(name: str) -> tuple[str, str]:
    """(``%RETRY%`` or ``%DLQ%`` or ``""``, the rest of the name)."""
    for prefix in (RETRY_TOPIC_PREFIX, DLQ_TOPIC_PREFIX):
        if name.startswith(prefix):
            return prefix, name[len(prefix):]
    return "", name


def has_namespace(namespace: str | None, name: str) -> bool:
    """True when ``name`` (after any retry/DLQ prefix) already starts with ``namespace%``."""
    if not namespace or not name or is_system(name):
        return False
    return split_prefix(name)[1].startswith(namespace + SEPARATOR)


def wrap(namespace: str | None, name: str) -> str:
    """The name as the cluster knows it: ``Orders`` -> ``ns%Orders``, ``%RETRY%G`` -> ``%RETRY%ns%G``."""
    if not namespace or not name or is_system(name) or has_namespace(namespace, name):
        return name
    prefix, rest = split_prefix(name)
    return f"{prefix}{namespace}{SEPARATOR}{rest}"


def unwrap(namespace: str | None, name: str) -> str:
    """The name as the user wrote it: ``ns%Orders`` -> ``Orders``, ``%DLQ%ns%G`` -> ``%DLQ%G``.

    Only this namespace is taken off; a name under another namespace, or under
    none, comes back unchanged.
    """
    if not has_namespace(namespace, name):
        return name
    prefix, rest = split_prefix(name)
    return prefix + rest[len(namespace) + 1:]  # type: ignore[arg-type]  # has_namespace: namespace is set


def wrap_queue(namespace: str | None, mq: MessageQueue) -> MessageQueue:
    """The queue with its topic wrapped (Java's ``queueWithNamespace``)."""
    topic = wrap(namespace, mq.topic)
    return mq if topic == mq.topic else MessageQueue(topic, mq.broker_name, mq.queue_id)


def unwrap_queue(namespace: str | None, mq: MessageQueue) -> MessageQueue:
    """The queue with its topic unwrapped, for the user's eyes."""
    topic = unwrap(namespace, mq.topic)
    return mq if topic == mq.topic else MessageQueue(topic, mq.broker_name, mq.queue_id)


def plain_text(namespace: str | None, text: str) -> str:
    """``text`` with every name under ``namespace`` shown plain (``took ns%Orders`` -> ``took Orders``).

    For log lines, which name queues and groups as the engine holds them: the
    namespace is taken off only where it starts a name (after a character that
    cannot be part of one, or after the ``%`` of ``%RETRY%`` / ``%DLQ%``), so
    ``Xns%T`` is left alone.
    """
    if not namespace or SEPARATOR not in text:
        return text
    return _plain_pattern(namespace).sub("", text)


_PATTERNS: dict[str, re.Pattern[str]] = {}


def _plain_pattern(namespace: str) -> re.Pattern[str]:
    pattern = _PATTERNS.get(namespace)
    if pattern is None:
        pattern = _PATTERNS[namespace] = re.compile(r"(?<![A-Za-z0-9_|-])" + re.escape(namespace + SEPARATOR))
    return pattern


def wrapped_length_error(namespace: str | None, name: str, what: str) -> str | None:
    """A message when ``name`` wrapped in ``namespace`` is longer than RocketMQ allows, else None."""
    if not namespace:
        return None
    full = wrap(namespace, split_prefix(name)[1])
    limit = MAX_GROUP_LENGTH if what == "group" else MAX_NAME_LENGTH
    if len(full) > limit:
        return (f"{what} {name!r} in namespace {namespace!r} is {full!r} on the wire: {len(full)} characters, "
                f"more than RocketMQ's {limit}")
    return None
