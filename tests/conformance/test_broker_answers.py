"""Replay the captured Java and C++ client traffic at the embedded broker; compare with the real answers.

Each scenario's client requests (every connection except the broker's own
name-server connection) are sent to a fresh embedded broker in capture order,
paced at ``1/SCALE`` of the captured time, with the delay levels and long-poll
timeouts scaled the same way so that retries come due and held pulls time out
at the same point of the conversation. Requests are awaited before the next
one is sent, except pulls that may be held (suspend bit): those run on and
their answers are collected at the end.

Every answer is compared with the real broker's: the response code, the remark
(when it is not an exception text), the ext field names *in order*, and the
values that mean something: queue offsets and ids, commit-log offsets inside
message ids (records are byte-compatible, so they land at the same offsets),
min/max/next offsets, route bodies (after swapping the broker address), lock
bodies, consumer lists, and every field of every pulled record except
timestamps and socket ports.

One exception: pulls of a ``%RETRY%`` topic. The real broker stored
concurrent send-backs in whatever order its thread pool ran them, and a retry
comes due at a moment only the real clock knew, so which retry lands at which
offset, and which pull sees it first, is a race in the capture itself. Before
a retry pull the replay waits until our retry queue holds as much as the real
one did (so later commit-log offsets still line up), and after the replay it
compares the whole retry queue with every retry message the real broker
delivered (every field but offsets and times).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rmqrun.broker.app import EmbeddedBroker
from rmqrun.protocol.bodies import ResetOffsetBody
from rmqrun.remoting import fastjson, frame
from rmqrun.remoting.codes import RequestCode as R
from rmqrun.remoting.codes import ResponseCode
from rmqrun.remoting.connection import Connection
from rmqrun.remoting.frame import RemotingCommand
from rmqrun.remoting.message import decode_messages
from rmqrun.remoting.msg_id import decode_offset_msg_id
from tests import captures
from tests.conformance.shapes import shape as _shape

pytestmark = [captures.requires_captures, pytest.mark.timeout(240)]

SCALE = 5.0
#: The 4.9.8 table divided by SCALE where the captures use it (levels 3 and 4: 10 s and 30 s).
SCALED_DELAYS = "1s 1s 2s 6s 12s 24s 36s 48s 60s 72s 84s 96s 108s 120s 4m 6m 12m 24m"
CAPTURED_BROKER = "127.0.0.1:10911"
#: Long.MAX_VALUE: a query time range without an end.
MAX_MS = 2**63 - 1
#: An answer later than this after its request was a held (long-polling) pull.
HELD_AFTER_S = 0.4

#: Requests the embedded broker deliberately does not serve: answered REQUEST_CODE_NOT_SUPPORTED
#: instead, which the test checks. (Every code of the captures is served now.)
UNSERVED: set[int] = set()
#: Admin answers whose values depend on the moment, the machine or the broker's tuning: compared
#: by shape (response code, remark, ext field names, body keys), see :func:`body_shape`.
SHAPE_ONLY = {R.GET_BROKER_RUNTIME_INFO, R.GET_BROKER_CONFIG, R.GET_NAMESRV_CONFIG, R.GET_TOPIC_STATS_INFO,
              R.GET_CONSUMER_CONNECTION_LIST, R.GET_PRODUCER_CONNECTION_LIST, R.GET_CONSUME_STATS,
              R.INVOKE_BROKER_TO_GET_CONSUMER_STATUS, R.INVOKE_BROKER_TO_RESET_OFFSET, R.QUERY_MESSAGE}
#: Broker-config keys an operator looks for; both answers must name them (the rest is Java tuning).
CORE_BROKER_CONFIG = {"brokerName", "brokerClusterName", "brokerId", "brokerRole", "listenPort", "namesrvAddr",
                      "storePathRootDir", "flushDiskType", "autoCreateTopicEnable", "autoCreateSubscriptionGroup",
                      "defaultTopicQueueNums", "messageDelayLevel", "maxMessageSize", "mappedFileSizeCommitLog",
                      "longPollingEnable", "shortPollingTimeMills", "brokerIP1", "messageIndexEnable",
                      "defaultQueryMaxNum", "traceOn", "notifyConsumerIdsChangedEnable"}
#: Broker → client requests the replay's client connections answer with the Java consumer's captured answers.
FORWARDED = {R.RESET_CONSUMER_CLIENT_OFFSET, R.GET_CONSUMER_STATUS_FROM_CLIENT, R.GET_CONSUMER_RUNNING_INFO,
             R.CONSUME_MESSAGE_DIRECTLY}


def body_shape(code: int, body: bytes) -> Any:
    """What of an admin answer's body must match the real one."""
    if code == R.QUERY_MESSAGE:
        return None  # records: compared one by one
    if code in (R.GET_BROKER_CONFIG, R.GET_NAMESRV_CONFIG):
        lines = [line for line in body.decode().split("\n") if line]
        keys = {line.split("=", 1)[0] for line in lines if "=" in line}
        assert len(keys) == len(lines), f"not a properties text: {body[:200]!r}"
        return keys & CORE_BROKER_CONFIG if code == R.GET_BROKER_CONFIG else keys
    shape = _shape(fastjson.loads(body))
    if code == R.GET_BROKER_RUNTIME_INFO:  # one key names the store's path
        return sorted(k for k in shape["table"] if not k.startswith("commitLogDiskRatio_"))
    return shape


#: Captured answers that were races inside the real broker; ours answers in request order.
KNOWN = {
    ("d", 111): "the oneway UPDATE_CONSUMER_OFFSET just before it was still queued in the real broker's "
                "thread pool when this QUERY_CONSUMER_OFFSET ran (the README notes the race)",
}
#: Values that depend on the clock, not on the broker's logic.
CLOCK_DEPENDENT = {R.SEARCH_OFFSET_BY_TIMESTAMP, R.GET_EARLIEST_MSG_STORETIME}


@dataclass
class Mismatch:
    seq: int
    what: str

    def __str__(self) -> str:
        return f"#{self.seq}: {self.what}"


def _decode(cf: captures.CapturedFrame) -> RemotingCommand:
    return frame.decode_with_prefix(cf.raw)


def _record_view(body: bytes, addr: str) -> list[dict[str, Any]]:
    out = []
    for m in decode_messages(body, decompress=False):
        out.append({
            "topic": m.topic, "queue_id": m.queue_id, "queue_offset": m.queue_offset,
            "commit_log_offset": m.commit_log_offset, "sys_flag": m.sys_flag, "flag": m.flag, "body": m.body,
            "body_crc": m.body_crc, "reconsume_times": m.reconsume_times, "born_timestamp": m.born_timestamp,
            "born_ip": m.born_host.rsplit(":", 1)[0], "store_ip": m.store_host.rsplit(":", 1)[0],
            # ORIGIN_MESSAGE_ID names the store host: compare its commit-log offset only.
            "properties": [(k, v[-16:] if k == "ORIGIN_MESSAGE_ID" else v) for k, v in m.properties.items()],
        })
    return out


def _is_retry_pull(req: captures.CapturedFrame) -> bool:
    return req["code"] == R.PULL_MESSAGE and _decode(req).ext_fields.get("topic", "").startswith("%RETRY%")


def _without_offsets(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(({k: v for k, v in r.items() if k not in ("queue_offset", "commit_log_offset")} for r in records),
                  key=lambda r: r["body"])


def compare(req: captures.CapturedFrame, real: captures.CapturedFrame, ours: RemotingCommand,
            addr: str) -> list[str]:
    """Differences between the real broker's answer and ours, in words (empty: equivalent)."""
    code = req["code"]
    real_cmd = _decode(real)
    if _is_retry_pull(req):
        ok = {ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_OFFSET_MOVED}
        if real_cmd.code not in ok:  # e.g. SUBSCRIPTION_NOT_LATEST in g: that must match
            ok = {real_cmd.code}
        return [] if ours.code in ok else [f"retry pull answered {ours.code} {ours.remark!r}, real {real_cmd.code}"]
    if code in UNSERVED:
        return [] if ours.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED else [f"unserved code got {ours.code}"]
    diffs: list[str] = []
    if ours.code != real_cmd.code:
        return [f"code {ours.code} ({ours.remark!r}), real {real_cmd.code} ({real_cmd.remark!r})"]
    if code in SHAPE_ONLY:
        return _compare_shape(code, real_cmd, ours, addr)
    if (ours.remark or None) != (real_cmd.remark or None):
        diffs.append(f"remark {ours.remark!r}, real {real_cmd.remark!r}")
    if list(ours.ext_fields) != list(real_cmd.ext_fields):
        diffs.append(f"ext fields {list(ours.ext_fields)}, real {list(real_cmd.ext_fields)}")
    if code in CLOCK_DEPENDENT:
        return diffs
    for key, real_value in real_cmd.ext_fields.items():
        value = ours.ext_fields.get(key)
        if key == "msgId":
            real_offsets = [decode_offset_msg_id(i)[1] for i in real_value.split(",")]
            our_offsets = [decode_offset_msg_id(i)[1] for i in (value or "").split(",")] if value else []
            if real_offsets != our_offsets:
                diffs.append(f"msgId commit-log offsets {our_offsets}, real {real_offsets}")
        elif value != real_value:
            diffs.append(f"{key}={value!r}, real {real_value!r}")
    real_body = real_cmd.body or b""
    body = ours.body or b""
    if code in (R.PULL_MESSAGE, R.VIEW_MESSAGE_BY_ID):
        if _record_view(body, addr) != _record_view(real_body, CAPTURED_BROKER):
            diffs.append(f"records {_record_view(body, addr)} != real {_record_view(real_body, CAPTURED_BROKER)}")
    elif code == R.GET_CONSUMER_LIST_BY_GROUP and real_body:
        ours_ids = sorted(fastjson.loads(body)["consumerIdList"]) if body else []
        if ours_ids != sorted(fastjson.loads(real_body)["consumerIdList"]):
            diffs.append(f"consumer ids {ours_ids}, real {fastjson.loads(real_body)}")
    elif code in (R.GET_ROUTEINFO_BY_TOPIC, R.GET_BROKER_CLUSTER_INFO, R.LOCK_BATCH_MQ):
        if body.replace(addr.encode(), CAPTURED_BROKER.encode()) != real_body:
            diffs.append(f"body {body!r}, real {real_body!r}")
    elif real_body and code not in (R.GET_ALL_TOPIC_LIST_FROM_NAMESERVER,):
        if body != real_body:
            diffs.append(f"body {body[:200]!r}, real {real_body[:200]!r}")
    return diffs


def _compare_shape(code: int, real: RemotingCommand, ours: RemotingCommand, addr: str) -> list[str]:
    diffs = []
    if (ours.remark or None) != (real.remark or None):
        diffs.append(f"remark {ours.remark!r}, real {real.remark!r}")
    if sorted(ours.ext_fields) != sorted(k for k in real.ext_fields):
        diffs.append(f"ext fields {list(ours.ext_fields)}, real {list(real.ext_fields)}")
    body, real_body = ours.body or b"", real.body or b""
    if bool(body) != bool(real_body):
        return diffs + [f"body {body[:100]!r}, real {real_body[:100]!r}"]
    if not real_body:
        return diffs
    if code == R.QUERY_MESSAGE:
        if _record_view(body, addr) != _record_view(real_body, CAPTURED_BROKER):
            diffs.append(f"records {_record_view(body, addr)} != real {_record_view(real_body, CAPTURED_BROKER)}")
        return diffs
    mine, theirs = body_shape(code, body), body_shape(code, real_body)
    if code == R.GET_NAMESRV_CONFIG:
        if not mine or not mine <= theirs:
            diffs.append(f"namesrv config keys {sorted(mine - theirs)} are not the real name server's")
    elif mine != theirs:
        diffs.append(f"body shape {mine}, real {theirs}")
    return diffs


@dataclass
class ClientSide:
    """The replay's stand-in for the captured clients: answers forwarded requests as they did, records them."""

    answers: dict[int, list[tuple[captures.CapturedFrame, captures.CapturedFrame | None]]]
    received: list[RemotingCommand]

    @classmethod
    def from_capture(cls, frames: tuple[captures.CapturedFrame, ...],
                     replies: dict[int, captures.CapturedFrame]) -> "ClientSide":
        answers: dict[int, list[Any]] = {}
        for f in frames:
            if f["kind"] == "request" and f["dir"] == "s2c" and f["code"] in FORWARDED:
                answers.setdefault(f["code"], []).append((f, replies.get(f.seq)))
        return cls(answers, [])

    async def handle(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand | None:
        if cmd.code not in FORWARDED:
            return None  # NOTIFY_CONSUMER_IDS_CHANGED and friends: oneway, nothing to answer
        self.received.append(cmd)
        queue = self.answers.get(cmd.code) or []
        if cmd.is_oneway or not queue:
            return None
        _req, real = queue.pop(0)
        if real is None:
            return None
        captured = _decode(real)
        resp = cmd.response(captured.code, captured.remark, dict(captured.ext_fields), captured.body)
        resp.language = captured.language
        return resp


async def replay(scenario: str, data_dir: Path) -> tuple[list[Mismatch], dict[str, int]]:
    mismatches, stats, _client = await replay_with_clients(scenario, data_dir)
    return mismatches, stats


async def replay_with_clients(scenario: str, data_dir: Path) -> tuple[list[Mismatch], dict[str, int], ClientSide]:
    frames = captures.load(scenario)
    replies = {f["reply_to_seq"]: f for f in frames if f["kind"] == "response" and f.get("reply_to_seq") is not None}
    requests = [f for f in frames if f["kind"] == "request" and f["dir"] == "c2s"
                and not str(f["client"]).startswith("broker")]
    stats = {"compared": 0, "held": 0, "oneway": 0}
    mismatches: list[Mismatch] = []
    loop = asyncio.get_running_loop()
    client = ClientSide.from_capture(frames, replies)

    async with EmbeddedBroker(data_dir, message_delay_levels=SCALED_DELAYS) as eb:
        addr = eb.broker_address
        conns: dict[int, Connection] = {}
        held: list[tuple[captures.CapturedFrame, captures.CapturedFrame | None, asyncio.Task[RemotingCommand]]] = []

        async def conn_for(cf: captures.CapturedFrame) -> Connection:
            if cf["conn"] not in conns:
                target = eb.namesrv_address if cf["peer"] == "namesrv" else addr
                conns[cf["conn"]] = await Connection.open(target, handler=client.handle)
            return conns[cf["conn"]]

        start, t0 = loop.time(), requests[0]["t"]
        for req in requests:
            # The capture's causal order, not the clock: an answer the real broker gave
            # before this request was sent (a held pull that timed out, say) must be in
            # before we send it, however late load made ours. Time spent waiting here
            # shifts the rest of the schedule, so later gaps keep their scaled length.
            waited = await _answers_before(req, held)
            start += waited
            delay = start + (req["t"] - t0) / SCALE - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            cmd = _decode(req)
            real = replies.get(req.seq)
            if cmd.code == R.PULL_MESSAGE and "suspendTimeoutMillis" in cmd.ext_fields:
                cmd.ext_fields["suspendTimeoutMillis"] = str(_scaled_suspend(cmd, req, real))
            if cmd.code == R.QUERY_MESSAGE and int(cmd.ext_fields.get("endTimestamp", MAX_MS)) < MAX_MS:
                # "until now" on the capture host's clock: until now on ours
                cmd.ext_fields["endTimestamp"] = str(int(time.time() * 1000) + 1000)
            conn = await conn_for(req)
            if cmd.is_oneway:
                stats["oneway"] += 1
                await conn.oneway(cmd)
                continue
            if _is_retry_pull(req):
                immediate = real is not None and real["t"] - req["t"] <= HELD_AFTER_S
                await _retries_caught_up(eb, cmd, real if immediate else None)
            task = loop.create_task(conn.request(cmd, 60))
            may_be_held = cmd.code == R.PULL_MESSAGE and int(cmd.ext_fields.get("sysFlag", "0")) & 2
            if real is None or may_be_held or real["t"] - req["t"] > HELD_AFTER_S:
                held.append((req, real, task))
                continue
            ours = await task
            stats["compared"] += 1
            if (scenario, req.seq) in KNOWN:
                continue
            mismatches += [Mismatch(req.seq, f"{req['code_name']}: {d}") for d in compare(req, real, ours, addr)]
        for req, real, task in held:
            if real is None:
                task.cancel()  # the capture ended with it still held
                continue
            ours = await asyncio.wait_for(task, 60)
            stats["held"] += 1
            suspend_s = int(_decode(req).ext_fields.get("suspendTimeoutMillis", "0")) / 1000
            if (ours.code == ResponseCode.PULL_NOT_FOUND and real["code"] == ResponseCode.SUCCESS
                    and real["t"] - req["t"] > suspend_s):
                # RocketMQ sweeps held pulls every 5 s, so this one outlived its timeout and caught a
                # message; ours is answered at its deadline, as asked (rmqrun/broker/longpoll.py).
                stats["late_sweep"] = stats.get("late_sweep", 0) + 1
                continue
            mismatches += [Mismatch(req.seq, f"held {req['code_name']}: {d}") for d in compare(req, real, ours, addr)]
        mismatches += await _compare_retry_queues(frames, replies, requests, conns, addr)
        for conn in conns.values():
            conn.close()
    return mismatches, stats, client


#: How long the replay waits for an answer that the capture shows came before the next request.
CAUSAL_WAIT_S = 30.0


async def _answers_before(req: captures.CapturedFrame, held: list) -> float:  # type: ignore[type-arg]
    """Wait until every still-running request whose real answer came before ``req`` was sent
    has its answer too; returns the seconds waited."""
    pending = {task for _req, real, task in held if real is not None and real["t"] <= req["t"] and not task.done()}
    if not pending:
        return 0.0
    loop = asyncio.get_running_loop()
    began = loop.time()
    await asyncio.wait(pending, timeout=CAUSAL_WAIT_S)  # a miss shows up as a mismatch later
    return loop.time() - began


def _scaled_suspend(cmd: RemotingCommand, req: captures.CapturedFrame, real: captures.CapturedFrame | None) -> int:
    """A held pull's timeout on the replay clock.

    One the real broker let time out ends where it ended in the capture (RocketMQ sweeps
    held pulls every 5 s, so "15 s" meant 15 to 20 s); under load it may end later, and
    the replay then waits for it before sending what followed its answer in the capture
    (:func:`_answers_before`), e.g. the consumer's unregister. One that a message woke
    gets a second of slack, so load on the test machine cannot make it time out just
    before the message that woke it in the capture arrives.
    """
    timeout_ms = int(cmd.ext_fields["suspendTimeoutMillis"])
    if real is not None and real["code"] == ResponseCode.PULL_NOT_FOUND:
        return max(1, int((real["t"] - req["t"]) * 1000 / SCALE))
    return int(timeout_ms / SCALE) + 1000


async def _retries_caught_up(eb: EmbeddedBroker, cmd: RemotingCommand,
                             real: captures.CapturedFrame | None) -> None:
    """Before a retry pull, let our retry queue reach what the real one held (a sync point, not a check).

    ``real`` is the real answer when it came at once (then its maxOffset is what the queue held).
    """
    topic, queue_id = cmd.ext_fields["topic"], int(cmd.ext_fields["queueId"])
    need = int(cmd.ext_fields["queueOffset"])
    if real is not None and real["code"] == ResponseCode.SUCCESS:
        need = max(need, int(_decode(real).ext_fields.get("maxOffset", need)))
    for _ in range(100):
        if eb.broker.store.max_offset(topic, queue_id) >= need:
            return
        await asyncio.sleep(0.05)


async def _compare_retry_queues(frames, replies, requests, conns, addr) -> list[Mismatch]:  # type: ignore[no-untyped-def]
    real_retries: dict[str, list[dict[str, Any]]] = {}
    for req in requests:
        real = replies.get(req.seq)
        if _is_retry_pull(req) and real is not None and real["code"] == ResponseCode.SUCCESS:
            topic = _decode(req).ext_fields["topic"]
            real_retries.setdefault(topic, []).extend(_record_view(real.body, CAPTURED_BROKER))
    out = []
    for topic, real_records in real_retries.items():
        group = topic[len("%RETRY%"):]
        conn = await Connection.open(addr)
        ours: list[dict[str, Any]] = []
        for _ in range(50):  # retries come due within a few seconds of the replay's end
            resp = await conn.request(RemotingCommand(R.PULL_MESSAGE, {
                "consumerGroup": group, "topic": topic, "queueId": "0", "queueOffset": "0", "maxMsgNums": "32",
                "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0", "subVersion": "0",
                "subscription": "*"}), 10)
            ours = _record_view(resp.body, addr) if resp.code == ResponseCode.SUCCESS else []
            if len(ours) >= len(real_records):
                break
            await asyncio.sleep(0.2)
        conn.close()
        if _without_offsets(ours) != _without_offsets(real_records):
            out.append(Mismatch(-1, f"retry queue {topic}: {_without_offsets(ours)} != real {_without_offsets(real_records)}"))
    return out


@pytest.mark.parametrize("scenario", ["a", "b", "c", "d", "e", "f"])
def test_replayed_scenario_gets_the_real_brokers_answers(scenario: str, tmp_path: Path) -> None:
    mismatches, stats = asyncio.run(replay(scenario, tmp_path / "data"))
    assert stats["compared"] > 10
    assert not mismatches, "\n".join(map(str, mismatches))


def _forwarded_view(cmd: RemotingCommand) -> tuple[Any, ...]:
    """What of a broker → client request must match: code, ext field names, and the body's meaning."""
    body: Any = None
    if cmd.code == R.RESET_CONSUMER_CLIENT_OFFSET:
        body = sorted((mq.topic, mq.queue_id, o) for mq, o in ResetOffsetBody.from_json(cmd.body or b"").offset_table.items())
    elif cmd.code == R.CONSUME_MESSAGE_DIRECTLY:
        body = [(r["topic"], r["queue_id"], r["queue_offset"], r["body"]) for r in _record_view(cmd.body or b"", "")]
    values = {k: v for k, v in cmd.ext_fields.items() if k not in ("Signature", "AccessKey")}
    return cmd.code, sorted(cmd.ext_fields), values, body


def test_admin_scenario_gets_the_real_brokers_answers_and_forwards_what_it_forwarded(tmp_path: Path) -> None:
    """Scenario g: every mqadmin request answered like 4.9.8 (by shape where values are the moment's),
    and the broker → client calls (reset, status, running info, consume directly) sent to the consumer's
    connection as the real broker sent them, the Java consumer's captured answers passed back."""
    mismatches, stats, client = asyncio.run(replay_with_clients("g", tmp_path / "data"))
    assert stats["compared"] > 10
    assert not mismatches, "\n".join(map(str, mismatches))
    captured = [_decode(f) for f in captures.load("g") if f["kind"] == "request" and f["dir"] == "s2c"
                and f["code"] in FORWARDED]
    assert {c.code for c in captured} == set(FORWARDED)
    assert [_forwarded_view(c) for c in client.received] == [_forwarded_view(c) for c in captured]


def test_shape_comparison_notices_a_missing_or_renamed_field() -> None:
    """The shape check of the admin answers can fail: a field dropped from every entry, or renamed."""
    frames = captures.load("g")
    stats = next(f for f in frames if f["kind"] == "response" and f.get("reply_to_seq") is not None
                 and f["code"] == 0 and b'"consumeTps"' in f.body)
    real = _decode(stats)
    req = next(f for f in frames if f.seq == stats["reply_to_seq"])
    same = real.response(real.code, real.remark, dict(real.ext_fields), real.body)
    assert compare(req, stats, same, CAPTURED_BROKER) == []
    for broken in (real.body.replace(b'"lastTimestamp"', b'"lastTime"'), real.body.replace(b'"consumeTps":', b'"tps":')):
        ours = real.response(real.code, real.remark, dict(real.ext_fields), broken)
        assert compare(req, stats, ours, CAPTURED_BROKER), broken[:80]
