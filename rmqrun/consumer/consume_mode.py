"""The consume mode: one frozen value that says how a consumer takes its messages.

Three settings make the mode (``orderly``, ``order_by``/``order_key`` and
``consume_mode``), and before this module each place that needed it (which
engine starts, which consume service runs, the start-up log, ``rmqrun check``,
the refusals of combinations that cannot work) worked it out on its own, and
the descriptions drifted. :func:`mode_of` turns the settings into one
:class:`ConsumeMode`; ``ConsumerConfig.mode`` is that value, and everything that
asks "which mode" asks it:

============  =========  ================  ===============  ==================================
mode          engine     pulled queues     popped queues    description
============  =========  ================  ===============  ==================================
CONCURRENT    push       concurrent        (none)           ``concurrently``
ORDERLY       push       orderly           (none)           ``orderly``
ORDERLY_KEY   push       keyed             (none)           ``orderly by key (<order_key>)``
POP           pop        concurrent        pop              ``concurrently by POP``
POP_ORDERLY   pop        orderly           pop-orderly      ``orderly by POP``
============  =========  ================  ===============  ==================================

A POP engine still pulls ``%RETRY%<group>`` (Java consumes the push retry topic
by PULL in every mode), so a POP mode names both of its services. Key order on
POP does not fit: the broker's order mode blocks a whole queue per pop, so
there is nothing to order by key inside it; :meth:`ConsumeMode.validate` refuses
it with the way out.

The names here are plain strings, so the mode stands below the engines and
services it names (``rmqrun.consumer.engines`` and
``rmqrun.consumer.consume_services`` map them to classes) and ``config.py`` can
hold it without an import cycle.

``consume_mode: auto`` is the sixth value, :data:`AUTO`: concurrent, with an
engine that follows the broker's message-request-mode table per topic
(``mode_follow.py``), pulling a topic while the group is PULL and popping it
while it is POP, as a Java 5.x push consumer with ``clientRebalance=false``.
Like Java (which rebalances orderly listeners itself whatever that flag says)
it is not offered for orderly consumption, and not for BROADCASTING.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Protocol, Tuple

from rmqrun.errors import ConfigError


class ModeSettings(Protocol):
    """What a mode's cross-checks read of the settings (``ConsumerConfig``; named here, not imported,
    because ``config.py`` holds the mode)."""

    auto_commit: bool
    consume_mode: str

    @property
    def clustering(self) -> bool: ...


#: a refusal: the setting, its value, what is allowed instead
Problem = Optional[Tuple[str, object, str]]

#: the engine that pulls (rebalanced queues) and the one that pops (5.x, broker-shared queues)
ENGINE_PUSH = "push"
ENGINE_POP = "pop"
#: pulls or pops each topic as the broker's table says (``AutoPushConsumer``)
ENGINE_AUTO = "auto"

#: the services (rmqrun.consumer.consume_services maps these names to classes)
SERVICE_CONCURRENT = "concurrent"
SERVICE_ORDERLY = "orderly"
SERVICE_KEYED = "keyed"
SERVICE_POP = "pop"
SERVICE_POP_ORDERLY = "pop-orderly"


@dataclass(frozen=True, slots=True)
class ConsumeMode:
    """One consume mode (compare with ``==``; :data:`CONCURRENT` and friends are the values)."""

    #: ``concurrent``, ``orderly``, ``orderly-key``, ``pop`` or ``pop-orderly``
    kind: str
    #: the engine: :data:`ENGINE_PUSH` (``PushConsumer``) or :data:`ENGINE_POP` (``PopPushConsumer``)
    engine: str
    #: the service that consumes pulled queues (in POP modes: ``%RETRY%<group>`` only)
    service: str
    #: the service that consumes popped messages (None: this mode pops nothing)
    pop_service: str | None = None
    #: key mode: where a message's key comes from (``sharding_key``, ``keys``, ``tags``, ``property:NAME``)
    order_key: str | None = None

    @property
    def orderly(self) -> bool:
        return self.kind in ("orderly", "orderly-key", "pop-orderly", "pop-key")

    @property
    def by_key(self) -> bool:
        return self.kind in ("orderly-key", "pop-key")

    @property
    def pop(self) -> bool:
        return self.engine == ENGINE_POP

    @property
    def follows_broker(self) -> bool:
        """``auto``: pulls or pops each topic as the broker's table says."""
        return self.engine == ENGINE_AUTO

    @property
    def description(self) -> str:
        """The words the start-up log, ``rmqrun check`` and ``rmqrun status`` use for this mode."""
        if self.follows_broker:
            return "concurrently by pull or POP as the broker's mode table says (auto)"
        if self.by_key:
            return f"orderly by key ({self.order_key}){' by POP' if self.pop else ''}"
        base = "orderly" if self.orderly else "concurrently"
        return f"{base} by POP" if self.pop else base

    def __str__(self) -> str:
        return self.description

    def validate(self, config: ModeSettings) -> None:
        """Refuse the combinations of other settings this mode cannot honour (a :class:`ConfigError` with the
        setting, its value and the way out)."""
        for check in _CHECKS.get(self.kind, ()):
            problem = check(config)
            if problem is not None:
                name, value, allowed = problem
                raise ConfigError(f"{name}={value!r} is invalid: {allowed}")


CONCURRENT = ConsumeMode("concurrent", ENGINE_PUSH, SERVICE_CONCURRENT)
ORDERLY = ConsumeMode("orderly", ENGINE_PUSH, SERVICE_ORDERLY)
POP = ConsumeMode("pop", ENGINE_POP, SERVICE_CONCURRENT, SERVICE_POP)
POP_ORDERLY = ConsumeMode("pop-orderly", ENGINE_POP, SERVICE_ORDERLY, SERVICE_POP_ORDERLY)
AUTO = ConsumeMode("auto", ENGINE_AUTO, SERVICE_CONCURRENT, SERVICE_POP)


def orderly_by_key(order_key: str) -> ConsumeMode:
    return ConsumeMode("orderly-key", ENGINE_PUSH, SERVICE_KEYED, order_key=order_key)


def mode_of(*, orderly: bool, order_by: str, order_key: str, consume_mode: str) -> ConsumeMode:
    """The mode the settings name. Key order on POP is the POP value with the key kept aside, so that
    :meth:`ConsumeMode.validate` can refuse it with today's message rather than a lookup error."""
    if consume_mode == "auto":
        # orderly and key order keep the value's own kind, for validate to refuse with the way out
        return AUTO if not orderly else ConsumeMode("auto-orderly", ENGINE_AUTO, SERVICE_ORDERLY, SERVICE_POP)
    if consume_mode == "pop":
        if order_by == "key":
            return ConsumeMode("pop-key", ENGINE_POP, SERVICE_KEYED, SERVICE_POP_ORDERLY, order_key=order_key)
        return POP_ORDERLY if orderly else POP
    if order_by == "key":
        return orderly_by_key(order_key)
    return ORDERLY if orderly else CONCURRENT


def _key_needs_auto_commit(c: ModeSettings) -> Problem:
    if c.auto_commit:
        return None
    return ("auto_commit", c.auto_commit, "order_by=key commits per key and needs auto_commit=true "
            "(manual Commit()/Rollback() are queue-wide; use order_by=queue for them)")


def _no_key_on_pop(c: ModeSettings) -> Problem:
    return ("consume_mode", c.consume_mode, "order_by=key is not available with POP (the broker "
            "orders by queue); use --order-by queue, or --consume-mode pull for key order")


def _pop_orderly_needs_auto_commit(c: ModeSettings) -> Problem:
    if c.auto_commit:
        return None
    return ("consume_mode", c.consume_mode, "orderly POP acks each message as it succeeds and needs "
            "auto_commit=true (manual Commit()/Rollback() need --consume-mode pull)")


def _pop_is_clustering(c: ModeSettings) -> Problem:
    if c.clustering:
        return None
    return ("consume_mode", c.consume_mode, "POP is a clustering model (the broker shares messages "
            "among the group); use --consume-mode pull with BROADCASTING")


def _auto_is_clustering(c: ModeSettings) -> Problem:
    if c.clustering:
        return None
    return ("consume_mode", c.consume_mode, "auto follows the broker's PULL/POP table of the group, a clustering "
            "notion; use --consume-mode pull with BROADCASTING")


def _auto_is_concurrent(c: ModeSettings) -> Problem:
    return ("consume_mode", c.consume_mode, "auto follows the broker's table for concurrent consumption only "
            "(as Java's push consumer, which rebalances orderly listeners itself); with --orderly or "
            "--order-by key use --consume-mode pull, or pop for orderly POP")


#: per kind, the cross-checks in the order they are reported (the first that fails is the error)
_CHECKS: dict[str, tuple[Callable[[ModeSettings], Problem], ...]] = {
    "orderly-key": (_key_needs_auto_commit,),
    "pop-key": (_key_needs_auto_commit, _no_key_on_pop),
    "pop": (_pop_is_clustering,),
    "pop-orderly": (_pop_orderly_needs_auto_commit, _pop_is_clustering),
    "auto": (_auto_is_clustering,),
    "auto-orderly": (_auto_is_concurrent,),
}
