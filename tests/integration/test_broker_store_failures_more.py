"""The broker's answers to a send-back and to a batch send when the store cannot make them durable.

Same seam as ``test_broker_store_failures``: the commit log's fsync is replaced by a
gate the test holds closed (a flush timeout) or makes fail (the store fences itself).
A consumer's send-back that is not known durable must not be answered SUCCESS: the
client then re-publishes or retries locally, so the message is never dropped.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rmqrun.broker.app import EmbeddedBroker
from rmqrun.remoting.codes import RequestCode, ResponseCode
from rmqrun.remoting.message_batch import BatchItem, encode_batch
from tests.integration.broker_kit import Client, drain
from tests.integration.test_broker_store_failures import FsyncGate, gated

pytestmark = pytest.mark.timeout(90)


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(asyncio.wait_for(coro, 75))


async def _consumed(c: Client) -> object:
    await c.send("T", b"payload", queue_id=0, props={"idx": "1"})
    await c.heartbeat("c@1", "G", {"T": "*", "%RETRY%G": "*"})
    (msg,) = await drain(c, "G", "T", 4, expect=1)
    return msg


async def _send_back(c: Client, msg) -> object:  # type: ignore[no-untyped-def]
    return await c.call(RequestCode.CONSUMER_SEND_MSG_BACK, {
        "offset": str(msg.commit_log_offset), "group": "G", "delayLevel": "0", "originMsgId": msg.msg_id,
        "originTopic": "T", "unitMode": "false", "bname": "broker-a", "maxReconsumeTimes": "16"})


def _batch_ext(topic: str) -> dict[str, str]:
    return {"a": "PG", "b": topic, "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "1", "h": "0",
            "i": "WAIT\x01true", "j": "0", "k": "false", "m": "true", "n": "broker-a"}


def test_a_send_back_whose_fsync_times_out_is_not_answered_success(tmp_path: Path) -> None:
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d", flush_mode="sync", sync_flush_timeout_ms=300) as eb:
            c = await Client.connect(eb.namesrv_address, eb.broker_address)
            msg = await _consumed(c)
            with gated(eb.broker.store) as gate:
                resp = await _send_back(c, msg)
                assert gate.calls >= 1
                assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, "FLUSH_DISK_TIMEOUT")
            await c.close()
    run(main())


def test_a_send_back_and_a_batch_on_a_fenced_store_are_refused_and_store_nothing(tmp_path: Path) -> None:
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d", flush_mode="sync") as eb:
            store = eb.broker.store
            c = await Client.connect(eb.namesrv_address, eb.broker_address)
            msg = await _consumed(c)
            gate = FsyncGate()
            gate.error = OSError(5, "Input/output error")
            gate.open()
            store.set_commit_log_fsync(gate)
            first = await _send_back(c, msg)  # its fsync fails: the store fences itself
            assert first.code == ResponseCode.SYSTEM_ERROR and first.remark == "StoreIOError", first.remark
            again = await _send_back(c, msg)
            assert again.code == ResponseCode.SYSTEM_ERROR and again.remark == "StoreIOError"
            batch = await c.call(RequestCode.SEND_BATCH_MESSAGE, _batch_ext("Batch"),
                                 encode_batch([BatchItem(b"b%d" % i, {"WAIT": "true"}) for i in range(3)]))
            assert batch.code == ResponseCode.SERVICE_NOT_AVAILABLE, (batch.code, batch.remark)
            assert "fenced" in batch.remark
            store.set_commit_log_fsync(None)
            # nothing of the refused batch was written; the retry topic holds at most the one
            # record whose fsync failed (written, never acknowledged), never the fenced second
            assert store.max_offset("Batch", 0) == 0
            assert store.max_offset("%RETRY%G", 0) <= 1
            await c.close()
    run(main())
