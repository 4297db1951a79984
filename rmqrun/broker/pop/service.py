"""POP, ACK and CHANGE_MESSAGE_INVISIBLETIME on the broker's state (the non-KV path of RocketMQ 5.3.3).

:meth:`PopService.pop` reads up to ``maxMsgNums`` messages for a group: from the pop retry topic first one
time in five (``popFromRetryProbability`` 20), then the topic's queues (all readable queues from a random
start when ``queueId`` is -1), then the retry topic again if the batch is not full. A pop is one call on the
event loop: pops of several consumers sharing few queues are served one after the other, each from where the
one before stopped (Java try-locks each queue against its other threads). A pop starts at max(committed
consumer offset, end of the queue's newest checkpoint) and, outside order mode, moves the consumer offset past
what it handed out at once; each queue read that found messages leaves one :class:`PopCheckpoint` (in the
durable :class:`CheckpointLog`) that acks tick off and that the revive service turns into retry messages if
it is not fully acked by popTime + invisibleTime.

Messages read from the retry topic go out under the original topic with ``POP_CK`` set by the broker
(``popMsgFromQueue``); normal messages go out as stored (the client builds their receipt).
"""

from __future__ import annotations

import random
import struct
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from rmqrun.broker.messages import read_stored
from rmqrun.broker.pop.checkpoint import PopCheckpoint
from rmqrun.broker.pop.ck_log import CheckpointLog
from rmqrun.broker.pop.order_info import CommitStatus
from rmqrun.broker.store import GetMessageStatus as S
from rmqrun.protocol.pop import (
    INIT_MODE_MIN,
    POP_ORDER_REVIVE_QID,
    PROPERTY_POP_CK,
    ReceiptHandle,
    encode_offset_infos,
    encode_order_count_info,
    real_topic,
    retry_flag_of,
)
from rmqrun.protocol.pop_batch_ack import BatchAck
from rmqrun.protocol.subscription import SubscriptionData
from rmqrun.remoting.message import PHYSICAL_OFFSET_POS, QUEUE_OFFSET_POS, encode_stored
from rmqrun.topic_names import is_retry_topic, pop_retry_topic

if TYPE_CHECKING:
    from rmqrun.broker.pop.order_info import OrderInfoTable

_LONG = struct.Struct(">q")
#: Revive queues a non-order checkpoint is spread over (BrokerConfig.reviveQueueNum).
REVIVE_QUEUE_NUM = 8
#: Share of pops (percent) that read the retry topic first (BrokerConfig.popFromRetryProbability).
POP_FROM_RETRY_PROBABILITY = 20
_RESET = {S.OFFSET_TOO_SMALL, S.OFFSET_OVERFLOW_BADLY, S.OFFSET_FOUND_NULL}
_SKIPPED = {S.NO_MATCHED_MESSAGE, S.OFFSET_FOUND_NULL, S.MESSAGE_WAS_REMOVING}


@dataclass(slots=True)
class PopCounters:
    """What the broker's admin answers show of POP (since start)."""

    popped: int = 0
    acked: int = 0
    changed: int = 0
    revived: int = 0
    checkpoints: int = 0

    def as_dict(self) -> dict[str, int]:
        return {"popped": self.popped, "acked": self.acked, "changed": self.changed, "revived": self.revived,
                "checkpoints": self.checkpoints}


@dataclass(slots=True)
class PopRequest:
    group: str
    topic: str
    queue_id: int
    max_msgs: int
    invisible_time: int
    init_mode: int
    subscription: SubscriptionData
    order: bool = False
    attempt_id: str | None = None


@dataclass(slots=True)
class PopResult:
    pop_time: int
    invisible_time: int
    revive_qid: int
    records: list[Any] = field(default_factory=list)
    rest_num: int = 0
    #: the queues read that handed out messages, in order: (retry flag, queue id, start offset, offsets)
    reads: list[tuple[str, int, int, tuple[int, ...]]] = field(default_factory=list)
    order_counts: dict[tuple[str, int, int | None], int] = field(default_factory=dict)
    #: checkpoints written, per real topic (the statistics take them once per pop)
    checkpoints: dict[str, int] = field(default_factory=dict)

    def header_fields(self, order: bool) -> dict[str, str]:
        """PopMessageResponseHeader in its declaration order, as the text the wire carries (every field is
        set: the answer takes them as they are)."""
        start_info, msg_info = encode_offset_infos(self.reads)
        fields = {
            "popTime": str(self.pop_time), "invisibleTime": str(self.invisible_time),
            "reviveQid": str(self.revive_qid), "restNum": str(self.rest_num),
            "startOffsetInfo": start_info, "msgOffsetInfo": msg_info}
        if order:
            fields["orderCountInfo"] = encode_order_count_info(self.order_counts)
        return fields


def now_ms() -> int:
    return int(time.time() * 1000)


def record_queue_offset(record: Any) -> int:
    return _LONG.unpack_from(record, QUEUE_OFFSET_POS)[0]


class PopService:
    """POP state of one broker: checkpoints, queue try-locks, counters; order mode through ``orders``."""

    def __init__(self, broker: Any, ck_log: CheckpointLog) -> None:
        self.broker = broker
        self.ck_log = ck_log
        self.counters = PopCounters()
        self.orders: OrderInfoTable | None = None
        self._ck_seq = 0
        self._random = random.Random()
        #: Called with (topic, group, queue id) when an order-mode queue may be popped again.
        self.on_unblocked: list[Any] = []
        #: Called with the new checkpoint's revive time (epoch ms) after one is added: the revive service may
        #: have to wake earlier.
        self.wake_revive: Any = lambda revive_at_ms=None: None

    @property
    def broker_name(self) -> str:
        return self.broker.config.broker_name

    # ------------------------------------------------------------------ pop

    def pop(self, req: PopRequest) -> PopResult:
        broker = self.broker
        if req.order:
            revive_qid = POP_ORDER_REVIVE_QID
        else:
            revive_qid = self._ck_seq % REVIVE_QUEUE_NUM
            self._ck_seq += 1
        result = PopResult(pop_time=now_ms(), invisible_time=req.invisible_time, revive_qid=revive_qid)
        random_q = int(self._random.random() * 100)  # randrange(100) at a tenth of the cost
        need_retry = random_q < POP_FROM_RETRY_PROBABILITY
        retry_topic = pop_retry_topic(req.group, req.topic)
        if need_retry and not req.order:
            self._pop_topic(req, result, retry_topic, True, random_q)
        if req.queue_id < 0:
            self._pop_topic(req, result, req.topic, False, random_q)
        else:
            self._pop_queue(req, result, req.topic, req.queue_id, False)
        if not need_retry and not req.order and len(result.records) < req.max_msgs:
            self._pop_topic(req, result, retry_topic, True, random_q)
        records = result.records
        if records:
            if not req.order:
                self.wake_revive(result.pop_time + req.invisible_time)
            self.counters.popped += len(records)
            broker.stats.on_pop(req.group, req.topic, len(records), sum(map(len, records)), result.checkpoints)
        return result

    def _pop_topic(self, req: PopRequest, result: PopResult, topic: str, is_retry: bool, random_q: int) -> None:
        tc = self.broker.topics.get(topic)
        if tc is None or tc.read_queue_nums <= 0:
            return
        n = tc.read_queue_nums
        records, want = result.records, req.max_msgs
        for i in range(n):
            queue_id = (random_q + i) % n
            if len(records) >= want and not req.order:
                # full: what the other queues hold only counts in restNum (what _pop_queue adds, minus its lock)
                self._count_rest(req, result, topic, random_q, i, n)
                return
            self._pop_queue(req, result, topic, queue_id, is_retry)

    def _count_rest(self, req: PopRequest, result: PopResult, topic: str, random_q: int, i: int, n: int) -> None:
        """restNum of the queues a full pop does not read (``(random_q + j) % n`` for j from ``i``): max offset -
        :meth:`pop_offset` of each, the group's offsets of the topic and its checkpoints' ends looked up in
        place (a pop of 32 from one queue of 8 passes 7); a queue without a stored offset goes through
        :meth:`pop_offset`, which sets it."""
        store, group = self.broker.store, req.group
        committed = store.consumer_offsets.queue_offsets(group, topic)
        max_offset, latest, stored_of = store.max_offset, self.ck_log.latest_ends, committed.get
        rest = 0
        for j in range(i, n):
            queue_id = (random_q + j) % n
            stored = stored_of(queue_id)
            if stored is None or stored < 0:
                start = self.pop_offset(topic, group, queue_id, req.init_mode, committed=committed)
            else:
                end = latest.get((topic, group, queue_id), -1)
                start = stored if stored >= end else end
            rest += max_offset(topic, queue_id) - start
        result.rest_num += rest

    def pop_offset(self, topic: str, group: str, queue_id: int, init_mode: int, *, init: bool = True,
                   committed: Mapping[int, int] | None = None) -> int:
        """Where the next pop of a queue starts: the committed offset (set from ``init_mode`` the first time,
        and committed unless ``init`` is False) or the end of the newest checkpoint, whichever is further
        (``getPopOffset``). ``committed``: the group's offsets of ``topic`` by queue, read once by a caller that
        asks for several queues (``queue_offsets``); else this queue's is looked up."""
        if committed is None:
            stored = self.broker.store.consumer_offsets.query(group, topic, queue_id)
        else:
            stored = committed.get(queue_id)
        if stored is None or stored < 0:
            stored = self._init_offset(topic, queue_id, init_mode)
            if init:
                self.broker.store.consumer_offsets.commit(group, topic, queue_id, stored)
        return max(stored, self.ck_log.latest_end(topic, group, queue_id))

    def _init_offset(self, topic: str, queue_id: int, init_mode: int) -> int:
        store = self.broker.store
        if init_mode == INIT_MODE_MIN or is_retry_topic(topic):
            return store.min_offset(topic, queue_id)
        # initPopOffsetByCheckMsgInMem: a queue whose first message is still in memory is read from 0.
        if store.min_offset(topic, queue_id) <= 0:
            first = store.queue_entries(topic, queue_id, 0, 1)
            if first and not self.broker.in_disk(first[0].commit_log_offset):
                return 0
        return max(0, store.max_offset(topic, queue_id) - 1)

    def _pop_queue(self, req: PopRequest, result: PopResult, topic: str, queue_id: int, is_retry: bool) -> None:
        """One queue of a pop. Java try-locks the queue first (``popMsgFromQueue``) and skips it when another
        thread holds it; here a pop runs from start to end in one call on the event loop, so no other pop can be
        reading the queue meanwhile, and there is nothing to lock: concurrent pops of one consumer (three per
        queue -1 assignment) are served one after the other, each reading on from where the one before
        stopped."""
        offset = self.pop_offset(topic, req.group, queue_id, req.init_mode)
        if req.order and self.orders is not None and self.orders.check_block(
                topic, req.group, queue_id, req.attempt_id, req.invisible_time):
            return  # a popped offset is still out and invisible: the queue waits (order kept)
        if len(result.records) >= req.max_msgs:
            result.rest_num += self.broker.store.max_offset(topic, queue_id) - offset
            return
        self._read_queue(req, result, topic, queue_id, is_retry, offset)

    def _read_queue(self, req: PopRequest, result: PopResult, topic: str, queue_id: int, is_retry: bool,
                    offset: int) -> None:
        broker = self.broker
        store, cfg, group = broker.store, broker.config, req.group
        sub = req.subscription
        accept = None if sub.is_sub_all or sub.class_filter_mode else sub.matches_tags_code
        want = req.max_msgs - len(result.records)
        got = store.get(topic, queue_id, offset, want, cfg.max_transfer_bytes_in_memory, accept)
        if not got.records and got.status in _RESET:  # (an enum's hash is a Python call: records first)
            # The stored offset is outside the queue (retention, a reset): start again where it says.
            offset = got.next_begin_offset
            store.consumer_offsets.commit(group, topic, queue_id, offset)
            got = store.get(topic, queue_id, offset, want, cfg.max_transfer_bytes_in_memory, accept)
        if got.records:
            count = len(got.records)
            if got.next_begin_offset - offset == count:  # every offset of [offset, next) read: no need to look
                offsets = tuple(range(offset, offset + count))
            else:
                offsets = tuple([record_queue_offset(r) for r in got.records])
            flag = retry_flag_of(topic)
            if req.order:
                assert self.orders is not None
                result.order_counts.update(self.orders.update(
                    topic, group, queue_id, attempt_id=req.attempt_id, pop_time=result.pop_time,
                    invisible_time=req.invisible_time, offsets=offsets))
                store.consumer_offsets.commit(group, topic, queue_id, offset)  # moved on by the acks
            else:
                self.ck_log.add(PopCheckpoint(topic=topic, group=group, queue_id=queue_id, start_offset=offset,
                                              pop_time=result.pop_time, invisible_time=req.invisible_time,
                                              revive_qid=result.revive_qid, broker_name=self.broker_name,
                                              offsets=offsets))
                self.counters.checkpoints += 1
                result.checkpoints[topic] = result.checkpoints.get(topic, 0) + 1
                store.consumer_offsets.commit(group, topic, queue_id, got.next_begin_offset)
            result.reads.append((flag, queue_id, offset, offsets))
            if is_retry:
                result.records.extend(self._as_original(r, req, offset, result, topic) for r in got.records)
            else:
                result.records.extend(got.records)
        elif got.status in _SKIPPED and got.next_begin_offset > offset:
            # Everything read was filtered out: move on, so the next pop does not read it again.
            store.consumer_offsets.commit(group, topic, queue_id, got.next_begin_offset)
        result.rest_num += max(0, got.max_offset - got.next_begin_offset)

    def _as_original(self, record: Any, req: PopRequest, ck_offset: int, result: PopResult,
                     topic: str) -> bytes:
        """A retry-topic record re-encoded under the original topic, with the broker-built ``POP_CK``."""
        stored = read_stored(record)
        receipt = ReceiptHandle(ck_start_offset=ck_offset, pop_time=result.pop_time,
                                invisible_time=req.invisible_time, revive_qid=result.revive_qid,
                                retry_flag=retry_flag_of(topic), broker_name=self.broker_name,
                                queue_id=stored.queue_id, queue_offset=stored.queue_offset)
        props = stored.properties
        if props.get(PROPERTY_POP_CK) is None:
            props.put(PROPERTY_POP_CK, receipt.encode())
        return bytes(encode_stored(
            topic=req.topic, body=stored.body, properties=props.to_string(), queue_id=stored.queue_id,
            flag=stored.flag, sys_flag=stored.sys_flag, born_timestamp=stored.born_timestamp,
            born_host=stored.born_host, store_timestamp=stored.store_timestamp, store_host=stored.store_host,
            reconsume_times=stored.reconsume_times, queue_offset=stored.queue_offset,
            commit_log_offset=_LONG.unpack_from(record, PHYSICAL_OFFSET_POS)[0]))

    # ------------------------------------------------------------------ ack

    def ack(self, group: str, topic: str, queue_id: int, offset: int, receipt: ReceiptHandle) -> int:
        """One ACK_MESSAGE (``topic`` is the real topic); how many messages it newly acked (0 or 1)."""
        if receipt.is_order:
            return self._ack_order(group, topic, queue_id, offset, receipt.pop_time)
        # no checkpoint (revived already, or acked twice) or an offset it did not hand out: 0, a no-op as in Java
        _, n = self.ck_log.ack((topic, group, queue_id, receipt.ck_start_offset, receipt.pop_time,
                                receipt.broker_name), (offset,))
        self._count_acks(group, topic, n)
        return n

    def batch_ack(self, broker_name: str | None, acks: Iterable[BatchAck]) -> int:
        """The entries of one BATCH_ACK_MESSAGE: bit i of each acks offset ``so + i`` (offsets outside the queue
        are skipped); how many messages were newly acked. The statistics take the entries of each (group, real
        topic) that acked something in one call, as that many calls."""
        counted: dict[tuple[str, str], list[int]] = {}
        total = 0
        for ack in acks:
            topic = real_topic(ack.topic, ack.consumer_group, ack.retry)
            if ack.revive_queue_id == POP_ORDER_REVIVE_QID:
                total += self._batch_ack_order(ack, topic)  # counted per message, as a single ack's
                continue
            n = self._batch_ack_entry(broker_name, ack, topic)
            if n:
                total += n
                tally = counted.get((ack.consumer_group, topic))
                if tally is None:
                    counted[(ack.consumer_group, topic)] = [n, 1]
                else:
                    tally[0] += n
                    tally[1] += 1
        for (group, topic), (n, calls) in counted.items():
            self.counters.acked += n
            self.broker.stats.on_pop_acks(group, topic, n, calls)
        return total

    def _batch_ack_order(self, ack: BatchAck, topic: str) -> int:
        lo, hi = self.broker.store.offset_range(topic, ack.queue_id)
        return sum(self._ack_order(ack.consumer_group, topic, ack.queue_id, o, ack.pop_time)
                   for o in ack.offsets if lo <= o <= hi)

    def _batch_ack_entry(self, broker_name: str | None, ack: BatchAck, topic: str) -> int:
        """One entry of a non-order batch ack (not counted yet); how many it newly acked."""
        store = self.broker.store
        key = (topic, ack.consumer_group, ack.queue_id, ack.start_offset, ack.pop_time,
               broker_name or self.broker_name)
        ck = self.ck_log.get(key)
        if ck is None:
            return 0  # revived already, or acked twice: a no-op, as in Java
        lo, hi = store.offset_range(topic, ack.queue_id)
        so, num = ck.start_offset, len(ck.offsets)
        if num and ck.offsets[-1] - so == num - 1:
            # a pop without a filter: bit i of the ack is bit i of the checkpoint, one mask for all of them
            mask = ack.word
            if lo > so or hi < so + num - 1:  # the store no longer (or not yet) holds all of them: skip those
                first, last = max(0, lo - so), min(num - 1, hi - so)
                mask &= ((1 << (last + 1)) - 1) & ~((1 << first) - 1) if last >= first else 0
            n = self.ck_log.ack_bits(ck, mask)
        else:
            _, n = self.ck_log.ack(key, [o for o in ack.offsets if lo <= o <= hi])
        return n

    def _count_acks(self, group: str, topic: str, n: int) -> None:
        if n:
            self.counters.acked += n
            self.broker.stats.on_pop_ack(group, topic, n)

    def _ack_order(self, group: str, topic: str, queue_id: int, offset: int, pop_time: int) -> int:
        """``ackOrderly``: commit the queue up to its first un-acked offset and wake its pollers.
        Returns 1 (acked), 0 (an old ack: nothing to do) or -1 (the offset is not in the queue's batch)."""
        if self.orders is None:
            return 0
        offsets = self.broker.store.consumer_offsets
        committed = offsets.query(group, topic, queue_id)
        if committed is not None and offset < committed:
            return 0
        commit = self.orders.commit_and_next(topic, group, queue_id, offset, pop_time)
        if commit.status is CommitStatus.ILLEGAL:
            return -1
        if commit.status is not CommitStatus.COMMIT or commit.offset is None:
            return 0
        offsets.commit(group, topic, queue_id, commit.offset)
        self._count_acks(group, topic, 1)
        if self.orders.unblock_at(topic, group, queue_id) is None:
            for listener in self.on_unblocked:
                listener(topic, group, queue_id)
        return 1

    # ------------------------------------------------------------------ change invisible time

    def change_invisible(self, group: str, topic: str, queue_id: int, offset: int, invisible_time: int,
                         receipt: ReceiptHandle) -> tuple[int, int]:
        """A one-message checkpoint from now, then an ack of the old one (``appendCheckPointThenAckOrigin``);
        in order mode the message's next visible time moves instead. Returns (popTime, invisibleTime) of the
        answer."""
        now = now_ms()
        self.counters.changed += 1
        if receipt.is_order:
            return self._change_order(group, topic, queue_id, offset, now + invisible_time, receipt)
        # A checkpoint is known by (topic, group, queue, start offset, pop time, broker): one made in the
        # millisecond of its pop for the pop's first message has the key of the pop's own checkpoint, and would
        # replace it (and the ack below then drop both: the rest of the pop never revived). Move to a free one.
        while self.ck_log.get((topic, group, queue_id, offset, now, self.broker_name)) is not None:
            now += 1
        self.ck_log.add(PopCheckpoint(topic=topic, group=group, queue_id=queue_id, start_offset=offset,
                                      pop_time=now, invisible_time=invisible_time, revive_qid=receipt.revive_qid,
                                      broker_name=self.broker_name, offsets=(offset,)))
        self.counters.checkpoints += 1
        key = (topic, group, queue_id, receipt.ck_start_offset, receipt.pop_time, receipt.broker_name)
        self.ck_log.ack(key, [offset])
        self.wake_revive(now + invisible_time)
        return now, invisible_time

    def _change_order(self, group: str, topic: str, queue_id: int, offset: int, visible_at: int,
                      receipt: ReceiptHandle) -> tuple[int, int]:
        committed = self.broker.store.consumer_offsets.query(group, topic, queue_id)
        if self.orders is None or (committed is not None and offset < committed):
            return receipt.pop_time, receipt.invisible_time
        self.orders.update_next_visible_time(topic, group, queue_id, offset, receipt.pop_time, visible_at)
        if self.orders.unblock_at(topic, group, queue_id) is None:
            for listener in self.on_unblocked:
                listener(topic, group, queue_id)
        return receipt.pop_time, visible_at - receipt.pop_time

    # ------------------------------------------------------------------ queries

    def has_message(self, group: str, topic: str, queue_id: int, *, order: bool = False,
                    attempt_id: str | None = None) -> bool:
        """NOTIFICATION's question: would a pop find something (topic queues, or the pop retry topic unless in
        order mode, where a blocked queue does not count)?"""
        topics, store = self.broker.topics, self.broker.store
        tc = topics.get(topic)
        queues = [] if tc is None else (range(tc.read_queue_nums) if queue_id < 0 else [queue_id])
        for q in queues:
            if order and self.orders is not None and self.orders.check_block(topic, group, q, attempt_id, 0):
                continue
            if store.max_offset(topic, q) > self.pop_offset(topic, group, q, INIT_MODE_MIN, init=False):
                return True
        if order:
            return False
        retry = pop_retry_topic(group, topic)
        rtc = topics.get(retry)
        for q in range(rtc.read_queue_nums if rtc is not None else 0):
            if store.max_offset(retry, q) > self.pop_offset(retry, group, q, INIT_MODE_MIN, init=False):
                return True
        return False

    def next_unblock_ms(self, topic: str, group: str, queue_id: int) -> int | None:
        """Order mode: the earliest time one of the queues (all for -1) stops being blocked, None if none is."""
        if self.orders is None:
            return None
        tc = self.broker.topics.get(topic)
        queues = [] if tc is None else (range(tc.read_queue_nums) if queue_id < 0 else [queue_id])
        times = [t for t in (self.orders.unblock_at(topic, group, q) for q in queues) if t is not None]
        return min(times) if times else None

    def offset_reset(self, group: str, topic: str, queue_id: int) -> None:
        """The group's offset of a queue was reset by an operator: pops start there, not after the newest
        checkpoint, and an order-mode block of the queue is lifted (``resetPopOffset``)."""
        self.ck_log.forget_queue(topic, group, queue_id)
        if self.orders is not None:
            self.orders.clear_block(topic, group, queue_id)

    def in_flight(self, group: str | None = None) -> int:
        """Popped messages neither acked nor revived yet."""
        return sum(len(ck.unacked()) for ck in self.ck_log.all() if group is None or ck.group == group)
