"""Queue allocation strategies: which queues of a topic this consumer owns.

Every member of a consumer group runs the same strategy over the same inputs
(all queues of the topic, all client ids of the group) and keeps only its own
share; nobody coordinates. The split is therefore only correct if rmqrun
computes *exactly* what a Java 4.9.x consumer in the same group computes, down
to sort order, rounding and the consistent-hash ring. These classes mirror
``client/.../consumer/rebalance/*.java``; the tests compare them against
results produced by the Java classes themselves.

Java's RebalanceImpl sorts both lists before calling a strategy, while the
strategies themselves do not. Here each strategy sorts its inputs too, so a
caller that forgets cannot silently diverge from the rest of the group.
Sorting is idempotent, so results on sorted input are unchanged. Duplicate
client ids are kept (Java keeps them: the broker can report one id twice when
two connections share it), duplicate queues are dropped (Java's queue list
comes from a set).
"""

from __future__ import annotations

from loguru import logger

import bisect
import hashlib
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from typing import Any

from rmqrun.consumer.defaults import CONSISTENT_HASH_VIRTUAL_NODES
from rmqrun.model import MessageQueue
from rmqrun.protocol.allocation import allocate_averagely, allocate_by_circle



class AllocateStrategy(ABC):
    """One allocation algorithm; ``name`` is the Java ``getName()`` value."""

    name: str = ""

    @abstractmethod
    def allocate(
        self,
        consumer_group: str,
        current_cid: str,
        mq_all: Sequence[MessageQueue],
        cid_all: Sequence[str],
    ) -> list[MessageQueue]:
        """Return the queues ``current_cid`` should consume, in queue order."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def _prepare(
    consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
) -> tuple[list[MessageQueue], list[str]] | None:
    """Validate like AbstractAllocateMessageQueueStrategy.check, then sort.

    Empty arguments are programming errors (ValueError, like Java's
    IllegalArgumentException). A client id missing from the group list is a
    transient state (our heartbeat has not reached the broker yet): warn and
    own nothing, so we never consume a queue another member also owns.
    Returns None in that case.
    """
    if not current_cid:
        raise ValueError("current_cid is empty")
    if not mq_all:
        raise ValueError("mq_all is empty")
    if not cid_all:
        raise ValueError("cid_all is empty")
    if current_cid not in cid_all:
        logger.warning(
            "consumer group {}: client id {} is not in the group's client list {}; allocating nothing",
            consumer_group,
            current_cid,
            list(cid_all),
        )
        return None
    return sorted(set(mq_all)), sorted(cid_all)


class AllocateAveragely(AllocateStrategy):
    """"AVG" (Java's default): contiguous, near-equal blocks in sorted order."""

    name = "AVG"

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
        return allocate_averagely(current_cid, *prepared)


class AllocateAveragelyByCircle(AllocateStrategy):
    """"AVG_BY_CIRCLE": round robin, consumer i takes every queue j with j % n == i."""

    name = "AVG_BY_CIRCLE"

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
        return allocate_by_circle(current_cid, *prepared)


def java_md5_ring_hash(key: str) -> int:
    """The hash of ConsistentHashRouter's default MD5Hash.

    The first four digest bytes, big-endian, as an unsigned 32-bit value held
    in a Java long. Java hashes ``key.getBytes()`` in the platform charset;
    UTF-8 is the default on every JVM that runs RocketMQ in practice (and the
    only choice since JDK 18), and all client ids and queue names are ASCII.
    """
    return int.from_bytes(hashlib.md5(key.encode("utf-8")).digest()[:4], "big")


class ConsistentHashRing:
    """ConsistentHashRouter: physical nodes placed on an MD5 ring as virtual nodes.

    Virtual node ``i`` of client ``cid`` is keyed ``f"{cid}-{i}"``. Nodes are
    added in the given order and a later node that hashes to an occupied point
    replaces the earlier one (Java's TreeMap.put), which is why callers must
    add clients in sorted order to agree with Java. A key routes to the first
    ring point at or after its hash, wrapping to the smallest point.
    """

    __slots__ = ("_points", "_owners")

    def __init__(self, nodes: Iterable[str], virtual_nodes: int) -> None:
        if virtual_nodes < 0:
            raise ValueError(f"illegal virtual node count: {virtual_nodes}")
        ring: dict[int, str] = {}
        seen: set[str] = set()
        for node in nodes:
            # Java numbers a repeated physical node's replicas after the points it
            # still holds on the ring (getExistingReplicas), so a duplicate id adds
            # new points rather than rewriting its old ones.
            existing = sum(1 for owner in ring.values() if owner == node) if node in seen else 0
            seen.add(node)
            for i in range(virtual_nodes):
                ring[java_md5_ring_hash(f"{node}-{i + existing}")] = node
        self._points = sorted(ring)
        self._owners = [ring[p] for p in self._points]

    def route(self, key: str) -> str | None:
        if not self._points:
            return None
        pos = bisect.bisect_left(self._points, java_md5_ring_hash(key))
        return self._owners[pos if pos < len(self._points) else 0]


class AllocateConsistentHash(AllocateStrategy):
    """"CONSISTENT_HASH": each queue goes to the ring owner of ``str(mq)``.

    Shares are uneven but stable: a member joining or leaving moves only the
    queues near its ring points. ``str(mq)`` is Java's MessageQueue.toString().
    """

    name = "CONSISTENT_HASH"

    def __init__(self, virtual_nodes: int = CONSISTENT_HASH_VIRTUAL_NODES) -> None:
        if virtual_nodes < 0:
            raise ValueError(f"illegal virtual_nodes: {virtual_nodes}")
        self.virtual_nodes = virtual_nodes

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
        ring = ConsistentHashRing(cids, self.virtual_nodes)
        return [mq for mq in mqs if ring.route(str(mq)) == current_cid]

    def __repr__(self) -> str:
        return f"AllocateConsistentHash(virtual_nodes={self.virtual_nodes})"


class AllocateByConfig(AllocateStrategy):
    """"CONFIG": always the configured queues, whatever the group looks like.

    Like Java there is no validation: two members configured with the same
    queue both consume it; that is the operator's choice.
    """

    name = "CONFIG"

    def __init__(self, queues: Iterable[MessageQueue] = ()) -> None:
        self.queues = list(queues)

    def allocate(
        self,
        consumer_group: str,
        current_cid: str,
        mq_all: Sequence[MessageQueue],
        cid_all: Sequence[str],
    ) -> list[MessageQueue]:
        return list(self.queues)

    def __repr__(self) -> str:
        return f"AllocateByConfig(queues={self.queues!r})"


class AllocateByMachineRoom(AllocateStrategy):
    """"MACHINE_ROOM": only queues on brokers named ``<idc>@<name>`` with idc in ``idcs``.

    The eligible queues are split into equal contiguous blocks, then the
    remainder is dealt one each to the first consumers (Java's arithmetic,
    which differs from AVG's: the extra queues come from the end of the list).
    """

    name = "MACHINE_ROOM"

    def __init__(self, idcs: Iterable[str] = ()) -> None:
        self.idcs = frozenset(idcs)

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
        index = cids.index(current_cid)
        eligible = [mq for mq in mqs if _machine_room(mq.broker_name) in self.idcs]
        per_cid, remainder = divmod(len(eligible), len(cids))
        result = eligible[per_cid * index : per_cid * index + per_cid]
        if remainder > index:
            result.append(eligible[index + per_cid * len(cids)])
        return result

    def __repr__(self) -> str:
        return f"AllocateByMachineRoom(idcs={sorted(self.idcs)!r})"


def _machine_room(broker_name: str) -> str | None:
    """The idc of ``idc@name``; None unless the name has exactly one '@' (Java: split length 2)."""
    parts = broker_name.split("@")
    # Java's String.split drops trailing empty strings: "idc@" splits to ["idc"].
    while parts and parts[-1] == "":
        parts.pop()
    return parts[0] if len(parts) == 2 else None


STRATEGIES: dict[str, type[AllocateStrategy]] = {
    cls.name: cls
    for cls in (
        AllocateAveragely,
        AllocateAveragelyByCircle,
        AllocateConsistentHash,
        AllocateByConfig,
        AllocateByMachineRoom,
    )
}


def strategy_key(name: str) -> str:
    """A strategy name as the table keys it: case-insensitive, '-' counting as '_' ("avg-by-circle")."""
    return name.strip().upper().replace("-", "_")


def get_strategy(name: str, **options: Any) -> AllocateStrategy:
    """Build a strategy from its Java name ("AVG", "AVG_BY_CIRCLE", ...).

    Names are matched case-insensitively, '-' counting as '_'. ``options`` go
    to the constructor: ``virtual_nodes`` for CONSISTENT_HASH, ``queues`` for
    CONFIG, ``idcs`` for MACHINE_ROOM.
    """
    key = strategy_key(name)
    cls = STRATEGIES.get(key)
    if cls is None:
        raise ValueError(
            f"unknown allocation strategy {name!r}; valid names: {', '.join(STRATEGIES)}"
        )
    try:
        return cls(**options)
    except TypeError as exc:
        raise ValueError(f"bad options for allocation strategy {key}: {exc}") from exc
