"""Offsets: consumer offsets (query/update) and queue offsets (min/max/by time/earliest time).

``queryConsumerOffset`` (4.9.8 ConsumerManageProcessor) answers the stored
offset, or QUERY_NOT_FOUND, except that a group new to a queue whose first
message (offset 0) is still there and "in memory" gets 0: that is why a fresh
consumer with CONSUME_FROM_LAST_OFFSET on a young topic reads it from the
start (FACTS §1.4).

SEARCH_OFFSET_BY_TIMESTAMP has 4.9.8's semantics: an exact store-time match,
else whichever neighbour is closer in time (the earlier one on a tie); a time
after every message gives the *last* message's offset (not the max offset),
one before every message the first.
"""

from __future__ import annotations

from rmqrun.broker.processors.common import BadRequest, answer, parse_header
from rmqrun.broker.processors.context import BrokerContext
from rmqrun.protocol.headers import (
    GetEarliestMsgStoretimeRequestHeader,
    GetMaxOffsetRequestHeader,
    GetMinOffsetRequestHeader,
    QueryConsumerOffsetRequestHeader,
    SearchOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from rmqrun.remoting.codes import ResponseCode
from rmqrun.remoting.connection import Connection
from rmqrun.remoting.frame import RemotingCommand
from rmqrun.remoting.message import PHYSICAL_OFFSET_POS

import struct

_LONG = struct.Struct(">q")


class OffsetProcessor:
    def __init__(self, broker: BrokerContext) -> None:
        self.broker = broker

    async def query_consumer_offset(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        try:
            h = parse_header(cmd, QueryConsumerOffsetRequestHeader)
        except BadRequest as bad:
            return bad.response
        store = self.broker.store
        offset = store.consumer_offsets.query(h.consumer_group, h.topic, h.queue_id)
        if offset is not None and offset >= 0:
            return answer(cmd, header={"offset": offset})
        if store.min_offset(h.topic, h.queue_id) <= 0 and not self._first_in_disk(h.topic, h.queue_id):
            return answer(cmd, header={"offset": 0})
        return answer(cmd, ResponseCode.QUERY_NOT_FOUND, "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first")

    def _first_in_disk(self, topic: str, queue_id: int) -> bool:
        """``checkInDiskByConsumeOffset(topic, queue, 0)``: False when there is no message 0."""
        result = self.broker.store.get(topic, queue_id, 0, 1)
        if not result.records or self.broker.store.min_offset(topic, queue_id) > 0:
            return False
        (phys,) = _LONG.unpack_from(result.records[0], PHYSICAL_OFFSET_POS)
        return self.broker.in_disk(phys)

    async def update_consumer_offset(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        try:
            h = parse_header(cmd, UpdateConsumerOffsetRequestHeader)
        except BadRequest as bad:
            return bad.response
        self.broker.store.consumer_offsets.commit(h.consumer_group, h.topic, h.queue_id, h.commit_offset)
        return answer(cmd)

    async def get_max_offset(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        try:
            h = parse_header(cmd, GetMaxOffsetRequestHeader)
        except BadRequest as bad:
            return bad.response
        return answer(cmd, header={"offset": self.broker.store.max_offset(h.topic, h.queue_id)})

    async def get_min_offset(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        try:
            h = parse_header(cmd, GetMinOffsetRequestHeader)
        except BadRequest as bad:
            return bad.response
        return answer(cmd, header={"offset": self.broker.store.min_offset(h.topic, h.queue_id)})

    async def get_earliest_msg_storetime(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        try:
            h = parse_header(cmd, GetEarliestMsgStoretimeRequestHeader)
        except BadRequest as bad:
            return bad.response
        return answer(cmd, header={"timestamp": self.broker.store.earliest_store_time(h.topic, h.queue_id)})

    async def search_offset_by_timestamp(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        try:
            h = parse_header(cmd, SearchOffsetRequestHeader)
        except BadRequest as bad:
            return bad.response
        return answer(cmd, header={"offset": self.search(h.topic, h.queue_id, h.timestamp)})

    def search(self, topic: str, queue_id: int, ts: int) -> int:
        store = self.broker.store
        lo, hi = store.min_offset(topic, queue_id), store.max_offset(topic, queue_id)
        if hi <= lo:
            return 0
        right = store.search_offset_by_timestamp(topic, queue_id, ts, "lower")  # first with time >= ts
        if right >= hi:
            return hi - 1  # every message is older: the last one
        right_ts = store.store_time_at(topic, queue_id, right)
        if right_ts == ts or right == lo:
            return right
        left = right - 1
        left_ts = store.store_time_at(topic, queue_id, left)
        return right if abs(ts - left_ts) > abs(ts - right_ts) else left
