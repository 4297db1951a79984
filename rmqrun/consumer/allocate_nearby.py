"""MACHINE_ROOM_NEARBY: each machine room's queues to the consumers in that room.

The Java client's ``AllocateMachineRoomNearby`` is a proxy around another
strategy (AVG by default here) and a resolver that says which machine room a
broker and a consumer are deployed in. Each consumer computes, from the same
sorted inputs as every other member of the group:

1. the queues of brokers in *its own* room, split by the wrapped strategy among
   the consumers of its own room only;
2. for every *other* room that has no live consumer at all, that room's queues
   split by the wrapped strategy among *all* consumers of the group.

Rooms are visited in name order (Java's ``TreeMap``), and both lists keep the
order of the sorted inputs, so the wrapped strategy sees exactly the lists a
Java member passes it; a mixed Java/rmqrun group therefore owns every queue
once. A broker or consumer whose room cannot be told is an error for the whole
topic (Java throws ``IllegalArgumentException`` and its rebalance keeps the
previous assignment): owning queues on a guess could own them twice.

The Java class takes the resolver as code. Here it is configured without code
(:class:`RoomResolver`): a separator prefix (the Java test's resolver takes the
broker name up to ``-``), a regular expression, or a table. The room of a
consumer is read from its client id (``ip@instanceName[@unitName]``), because
that is all a member knows of the others; rmqrun puts its own ``machine_room``
in front of its instance name (``room-<name>``) so that the default consumer
resolver, and a Java resolver written the same way, find it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rmqrun.consumer.allocate import AllocateStrategy, _prepare, get_strategy, strategy_key
from rmqrun.errors import ConfigError, RmqrunError
from rmqrun.model import MessageQueue

NAME = "MACHINE_ROOM_NEARBY"
#: the broker's room: its name up to the first '-' (``room1-broker-a`` is in ``room1``), as in the Java test
DEFAULT_BROKER_ROOMS = "prefix:-"
#: a consumer's room: its instance name (the part after the first '@') up to the first '-'
DEFAULT_CONSUMER_ROOMS = "instance-prefix:-"
RESOLVER_FORMS = ("prefix:SEP", "instance-prefix:SEP", "regex:PATTERN", "table:NAME=ROOM,NAME=ROOM,...")


class RoomUnknown(RmqrunError, ValueError):
    """A broker or consumer the resolver cannot place in a room (Java: IllegalArgumentException)."""


@dataclass(frozen=True)
class RoomResolver:
    """Which machine room a name (a broker name, or a consumer's client id) is in.

    ``spec`` is one of :data:`RESOLVER_FORMS`; :meth:`parse` checks it. ``room``
    returns None for a name it cannot place.
    """

    spec: str
    _resolve: Callable[[str], str | None]

    @classmethod
    def parse(cls, spec: str, setting: str) -> "RoomResolver":
        kind, sep, arg = spec.partition(":")
        kind = kind.strip().lower()
        if not sep or not arg:
            raise _bad(setting, spec, "needs a form and its argument")
        if kind == "prefix":
            return cls(spec, lambda name: name.split(arg, 1)[0] or None)
        if kind == "instance-prefix":
            return cls(spec, lambda cid: _instance_field(cid).split(arg, 1)[0] or None)
        if kind == "regex":
            try:
                pattern = re.compile(arg)
            except re.error as exc:
                raise _bad(setting, spec, f"the pattern does not compile ({exc})") from None
            return cls(spec, lambda name: _regex_room(pattern, name))
        if kind == "table":
            return cls(spec, _parse_table(spec, arg, setting).get)
        raise _bad(setting, spec, f"unknown form {kind!r}")

    def room(self, name: str) -> str | None:
        return self._resolve(name)


def _bad(setting: str, spec: str, why: str) -> ConfigError:
    return ConfigError(f"{setting}={spec!r} is invalid: {why}; one of {', '.join(RESOLVER_FORMS)}")


def _instance_field(client_id: str) -> str:
    """``ip@instance[@unit]`` -> ``instance`` (the whole id when it has no '@')."""
    parts = client_id.split("@")
    return parts[1] if len(parts) > 1 else client_id


def _regex_room(pattern: re.Pattern[str], name: str) -> str | None:
    found = pattern.search(name)
    if found is None:
        return None
    return (found.group(1) if pattern.groups else found.group(0)) or None


def _parse_table(spec: str, arg: str, setting: str) -> dict[str, str]:
    table: dict[str, str] = {}
    for item in arg.split(","):
        name, eq, room = (part.strip() for part in item.partition("="))
        if not eq or not name or not room:
            raise _bad(setting, spec, f"table entry {item.strip()!r} is not NAME=ROOM")
        table[name] = room
    return table


class AllocateMachineRoomNearby(AllocateStrategy):
    """Same-room queues to same-room consumers; a room without consumers is shared by everyone."""

    name = NAME

    def __init__(self, wrapped: AllocateStrategy, brokers: RoomResolver, consumers: RoomResolver) -> None:
        if isinstance(wrapped, AllocateMachineRoomNearby):
            raise ConfigError(f"{NAME} cannot wrap itself; wrap AVG, AVG_BY_CIRCLE, CONSISTENT_HASH, ...")
        self.wrapped = wrapped
        self.brokers = brokers
        self.consumers = consumers

    @property
    def java_name(self) -> str:
        """What Java's ``getName()`` reports (running info): ``MACHINE_ROOM_NEARBY-AVG``."""
        return f"{NAME}-{self.wrapped.name}"

    def consumer_room(self, client_id: str) -> str:
        room = self.consumers.room(client_id)
        if not room:
            raise RoomUnknown(f"no machine room for consumer {client_id!r} (resolver {self.consumers.spec!r})")
        return room

    def broker_room(self, mq: MessageQueue) -> str:
        room = self.brokers.room(mq.broker_name)
        if not room:
            raise RoomUnknown(f"no machine room for broker {mq.broker_name!r} (resolver {self.brokers.spec!r})")
        return room

    def allocate(
        self,
        consumer_group: str,
        current_cid: str,
        mq_all: Sequence[MessageQueue],
        cid_all: Sequence[str],
    ) -> list[MessageQueue]:
        prepared = _prepare(consumer_group, current_cid, mq_all, cid_all)
        if prepared is None:
            return []
        mqs, cids = prepared
        queues_by_room: dict[str, list[MessageQueue]] = {}
        for mq in mqs:
            queues_by_room.setdefault(self.broker_room(mq), []).append(mq)
        consumers_by_room: dict[str, list[str]] = {}
        for cid in cids:
            consumers_by_room.setdefault(self.consumer_room(cid), []).append(cid)
        own_room = self.consumer_room(current_cid)
        result: list[MessageQueue] = []
        own_queues = queues_by_room.pop(own_room, [])
        if own_queues:
            result += self.wrapped.allocate(consumer_group, current_cid, own_queues, consumers_by_room[own_room])
        for room in sorted(queues_by_room):
            if room not in consumers_by_room:  # nobody lives there: every consumer shares its queues
                result += self.wrapped.allocate(consumer_group, current_cid, queues_by_room[room], cids)
        return result

    def __repr__(self) -> str:
        return f"AllocateMachineRoomNearby({self.wrapped!r}, brokers={self.brokers.spec!r}, " \
               f"consumers={self.consumers.spec!r})"


def nearby_strategy(*, machine_room: str | None, wrapped: str, broker_rooms: str,
                    consumer_rooms: str) -> AllocateMachineRoomNearby:
    """Build MACHINE_ROOM_NEARBY from its settings, refusing a configuration that names no room."""

    if not machine_room or not machine_room.strip():
        raise ConfigError(f"allocate_strategy={NAME} needs machine_room: the machine room this instance runs "
                          "in (--machine-room, RMQRUN_MACHINE_ROOM), e.g. --machine-room room1")
    if any(c in machine_room for c in "@- \t"):
        raise ConfigError(f"machine_room={machine_room!r} is invalid: it is written into the client id as "
                          "'<room>-<instance>', so it may not contain '@', '-' or blanks")
    if strategy_key(wrapped) == NAME:
        raise ConfigError(f"nearby_allocate_strategy={wrapped!r} is invalid: {NAME} cannot wrap itself")
    try:
        inner = get_strategy(wrapped)
    except ValueError as exc:
        raise ConfigError(f"nearby_allocate_strategy={wrapped!r} is invalid: {exc}") from None
    return AllocateMachineRoomNearby(inner, RoomResolver.parse(broker_rooms, "broker_machine_rooms"),
                                     RoomResolver.parse(consumer_rooms, "consumer_machine_rooms"))


def room_instance_name(machine_room: str, instance_name: str) -> str:
    """This instance's name with its room in front (``room1-4242#17``), unless it already starts so."""
    prefix = f"{machine_room}-"
    return instance_name if instance_name.startswith(prefix) else prefix + instance_name


def check_own_room(strategy: AllocateMachineRoomNearby, client_id: str, machine_room: str) -> None:
    """Refuse to start when the consumer resolver reads another room from our own client id.

    Every member derives our room from our client id; if that is not ``machine_room``, the others
    would place us in another room than we place ourselves, and queues would be owned twice or by
    nobody.
    """
    try:
        seen = strategy.consumer_room(client_id)
    except RoomUnknown:
        seen = None
    if seen != machine_room:
        raise ConfigError(f"machine_room={machine_room!r}, but consumer_machine_rooms="
                          f"{strategy.consumers.spec!r} reads {seen!r} from this instance's client id "
                          f"{client_id!r}: the other members would place it in another room; fix "
                          "consumer_machine_rooms or instance_name")


def is_nearby(strategy_name: str) -> bool:
    return strategy_key(strategy_name) == NAME


def client_instance_name(strategy_name: str, machine_room: str | None, instance_name: str,
                         clustering: bool) -> str:
    """The instance name the client id is built from: with MACHINE_ROOM_NEARBY, the room goes in front.

    ``DEFAULT`` is made unique first (pid#nanos, as the client instance would) so that two instances on
    one host still get two client ids.
    """
    if not is_nearby(strategy_name) or not machine_room:
        return instance_name
    # imported here: the settings table imports this module, and `rmqrun run --help` loads no client
    from rmqrun.client.instance import DEFAULT_INSTANCE_NAME, unique_instance_name
    if instance_name == DEFAULT_INSTANCE_NAME and clustering:
        instance_name = unique_instance_name()
    return room_instance_name(machine_room, instance_name)
