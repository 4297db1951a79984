"""Every path that appends to a queue wakes the pulls held on it (issue 14 item 8).

A pull is held on the target queue with a long suspend (``HOLD_S``), then a
message reaches that queue by one path: a direct send, a batch, a delayed
message coming due, a send-back into ``%RETRY%<group>`` (through the schedule
topic and the delay level), a send-back with delay level -1 into the DLQ, the
Java client's fallback send to the retry topic, and a retry-topic send past
its maximum (into the DLQ). The held pull must come back with the message long
before its hold would have expired: a path that stores without waking leaves
the consumer waiting for the whole hold (the "retried after 30 s instead of
10 s" symptom), which these tests see as a pull answered only at the hold's end.
The delays are 1 s per level, so each wake is expected about 1 s after the
append; the bound is half the hold, so a loaded machine does not fail them.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Awaitable, Callable

import pytest

from rmqrun.broker.app import EmbeddedBroker
from rmqrun.remoting.codes import RequestCode, ResponseCode
from rmqrun.remoting.message_batch import BatchItem, encode_batch
from tests.integration.broker_kit import Client, drain, messages, send_ext
from tests.waiting import eventually_async

pytestmark = pytest.mark.timeout(120)

FAST = " ".join(["1s"] * 18)
#: the hold asked for: far longer than the test may run, so an answer can only come from a wake
HOLD_S = 600.0
#: how long a wake may take to come (a delayed message comes due first): a bound that only ends a failure
WAKE_S = 30.0
GROUP = "G"


async def _held(eb: EmbeddedBroker, c: Client, topic: str, queue_id: int,
                offset: int) -> "asyncio.Task":  # type: ignore[type-arg]
    """A pull at the end of the queue, returned once the broker holds it (not after a guessed sleep:
    a pull still on its way when the append lands would find the message without any wake)."""
    task = asyncio.create_task(c.pull(GROUP, topic, queue_id, offset, suspend_ms=int(HOLD_S * 1000),
                                      timeout=HOLD_S + 10))

    def held() -> bool:
        if task.done():  # not AssertionError: eventually_async would take that for "not yet"
            raise RuntimeError(f"a pull at the end of {topic}:{queue_id} must be held, got {task.result()!r}")
        return eb.broker.hold.held_on(topic, queue_id) > 0

    await eventually_async(held, what=f"the broker to hold the pull on {topic}:{queue_id}")
    return task


async def _woken(task: "asyncio.Task") -> list:  # type: ignore[type-arg]
    """The held pull's answer: within the test it can only come from a wake (its hold is 600 s)."""
    done, _ = await asyncio.wait({task}, timeout=WAKE_S)
    assert done, f"the held pull was not woken within {WAKE_S:g} s (its hold runs {HOLD_S:g} s)"
    resp = task.result()
    assert resp.code == ResponseCode.SUCCESS, (resp.code, resp.remark)
    return messages(resp)


async def _original(c: Client, body: bytes) -> object:
    await c.send("T", body, queue_id=0, tags="TagA")
    got = [m for m in await drain(c, GROUP, "T", 4, expect=1) if m.body == body]
    assert got
    return got[0]


async def _send_back(c: Client, msg, delay_level: int, max_times: int = 16):  # type: ignore[no-untyped-def]
    ext = {"offset": str(msg.commit_log_offset), "group": GROUP, "delayLevel": str(delay_level),
           "originMsgId": msg.msg_id, "originTopic": "T", "unitMode": "false", "bname": "broker-a",
           "maxReconsumeTimes": str(max_times)}
    resp = await c.call(RequestCode.CONSUMER_SEND_MSG_BACK, ext)
    assert resp.code == ResponseCode.SUCCESS, resp.remark


Path_ = Callable[[Client], Awaitable[tuple[str, bytes]]]


async def direct_send(c: Client) -> tuple[str, int, Callable[[], Awaitable[None]], bytes]:
    async def append() -> None:
        await c.send("T", b"direct", queue_id=0, tags="TagA")
    return "T", 0, append, b"direct"


async def batch_send(c: Client) -> tuple[str, int, Callable[[], Awaitable[None]], bytes]:
    async def append() -> None:
        items = [BatchItem(b"batch", {"WAIT": "true", "TAGS": "TagA"})]
        ext = send_ext("T", queue_id=0, batch=True)
        resp = await c.call(RequestCode.SEND_BATCH_MESSAGE, ext, encode_batch(items))
        assert resp.code == ResponseCode.SUCCESS, resp.remark
    return "T", 0, append, b"batch"


async def delayed_send(c: Client) -> tuple[str, int, Callable[[], Awaitable[None]], bytes]:
    async def append() -> None:
        await c.send("T", b"delayed", queue_id=0, tags="TagA", props={"DELAY": "2"})
    return "T", 0, append, b"delayed"


async def send_back_with_delay(c: Client) -> tuple[str, int, Callable[[], Awaitable[None]], bytes]:
    original = await _original(c, b"retried")

    async def append() -> None:
        await _send_back(c, original, 0)  # level 3 + reconsume times: SCHEDULE_TOPIC, then %RETRY% when due
    return f"%RETRY%{GROUP}", 0, append, b"retried"


async def send_back_to_dlq(c: Client) -> tuple[str, int, Callable[[], Awaitable[None]], bytes]:
    original = await _original(c, b"hopeless")

    async def append() -> None:
        await _send_back(c, original, -1)
    return f"%DLQ%{GROUP}", 0, append, b"hopeless"


async def fallback_retry_send(c: Client) -> tuple[str, int, Callable[[], Awaitable[None]], bytes]:
    async def append() -> None:
        resp = await c.send(f"%RETRY%{GROUP}", b"fallback", queue_id=0, reconsume_times=1, max_reconsume_times=16,
                            props={"RETRY_TOPIC": "T", "DELAY": "4"})
        assert resp.code == ResponseCode.SUCCESS, resp.remark
    return f"%RETRY%{GROUP}", 0, append, b"fallback"


async def retry_send_past_max(c: Client) -> tuple[str, int, Callable[[], Awaitable[None]], bytes]:
    async def append() -> None:
        resp = await c.send(f"%RETRY%{GROUP}", b"past-max", queue_id=0, reconsume_times=5, max_reconsume_times=5,
                            props={"RETRY_TOPIC": "T", "DELAY": "8"})
        assert resp.code == ResponseCode.SUCCESS, resp.remark
    return f"%DLQ%{GROUP}", 0, append, b"past-max"


PATHS = [direct_send, batch_send, delayed_send, send_back_with_delay, send_back_to_dlq, fallback_retry_send,
         retry_send_past_max]


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.__name__)
def test_a_held_pull_is_woken_by_every_append_path(tmp_path: Path, path) -> None:  # type: ignore[no-untyped-def]
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d", message_delay_levels=FAST) as eb:
            c = await Client.connect(eb.namesrv_address, eb.broker_address)
            holder = await Client.connect(eb.namesrv_address, eb.broker_address)
            await c.send("T", b"seed", queue_id=0, tags="TagA")  # the topic exists before anything is held
            subs = {"T": "*", f"%RETRY%{GROUP}": "*", f"%DLQ%{GROUP}": "*"}
            await c.heartbeat("c@1", GROUP, subs)
            await holder.heartbeat("h@1", GROUP, subs)
            topic, queue_id, append, body = await path(c)
            if topic.startswith("%DLQ%"):
                # the DLQ topic is created on first use; an empty one is held at offset 0 once it exists
                eb.broker.topics.create_for_send_back(topic, 1)
            offset = eb.broker.store.max_offset(topic, queue_id)
            held = await _held(eb, holder, topic, queue_id, offset)
            await append()
            got = await _woken(held)
            assert [m.body for m in got] == [body]
            await holder.close()
            await c.close()

    asyncio.run(asyncio.wait_for(main(), 100))
