"""The pull consumer without a broker: argument checks, result processing, the offset table, cheap import."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys

import pytest

from rmqrun.client.broker import PullResult as WirePullResult
from rmqrun.errors import RmqrunError
from rmqrun.model import MessageQueue
from rmqrun.protocol.subscription import SubscriptionData
from rmqrun.pull import NotStartedError, PullStatus, WrongCallerError
from rmqrun.pull.async_consumer import AsyncPullConsumer
from rmqrun.pull.consumer import PullConsumer
from rmqrun.pull.offset_table import OffsetTable
from rmqrun.remoting.message import encode_stored
from rmqrun.remoting.message_props import java_string_hash

MQ = MessageQueue("T", "broker-a", 1)


def test_import_rmqrun_stays_cheap() -> None:
    code = ("import sys, rmqrun; loaded = sorted(m for m in sys.modules if m.startswith(('rmqrun.client', "
            "'rmqrun.pull', 'rmqrun.consumer'))); print(loaded); assert not loaded, loaded; "
            "assert rmqrun.PullConsumer.__name__ == 'PullConsumer'; "
            "assert rmqrun.AsyncPullConsumer.__name__ == 'AsyncPullConsumer'; "
            "assert 'rmqrun.pull' in sys.modules")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_unknown_attribute_is_an_attribute_error() -> None:
    import rmqrun
    with pytest.raises(AttributeError, match="NoSuchThing"):
        rmqrun.NoSuchThing  # noqa: B018


def test_namesrv_from_the_environment_or_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NAMESRV_ADDR", raising=False)
    with pytest.raises(ValueError, match=r"NAMESRV_ADDR"):
        PullConsumer()
    monkeypatch.setenv("NAMESRV_ADDR", "127.0.0.1:9")
    assert PullConsumer().namesrv == "127.0.0.1:9"
    with pytest.raises(ValueError, match="nohost"):
        PullConsumer("nohost")


@pytest.mark.parametrize("kwargs, match", [
    ({"group": ""}, "group"),
    ({"timeout": 0}, "timeout"),
    ({"timeout": -1.0}, "timeout"),
    ({"timeout": float("nan")}, "timeout"),
    ({"instance_name": " "}, "instance_name"),
])
def test_bad_constructor_arguments(kwargs: dict, match: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(ValueError, match=match):
        PullConsumer("127.0.0.1:9", **kwargs)


def test_calls_before_start_say_so() -> None:
    c = PullConsumer("127.0.0.1:9")
    with pytest.raises(NotStartedError, match="not started"):
        c.max_offset(MQ)
    c.close()  # closing a consumer that never started is fine
    with pytest.raises(NotStartedError, match="closed"):
        c.start()

    async def close_inside_a_running_loop() -> None:
        PullConsumer("127.0.0.1:9").close()  # must not need asyncio.run
    asyncio.run(close_inside_a_running_loop())

    async def main() -> None:
        a = AsyncPullConsumer("127.0.0.1:9")
        with pytest.raises(NotStartedError):
            await a.pull(MQ, "*", 0)
        await a.close()
        with pytest.raises(NotStartedError, match="closed"):
            await a.start()
    asyncio.run(main())


def test_argument_checks_name_the_argument() -> None:
    async def main() -> None:
        async with AsyncPullConsumer("127.0.0.1:9", timeout=0.5) as a:
            with pytest.raises(ValueError, match=r"offset must be between 0 .* got -1"):
                await a.pull(MQ, "*", -1)
            with pytest.raises(ValueError, match=r"max_nums must be between 1 .* got 0"):
                await a.pull(MQ, "*", 0, 0)
            with pytest.raises(ValueError, match=r"max_nums .* got 2147483648"):
                await a.pull(MQ, "*", 0, 2**31)
            with pytest.raises(TypeError, match="offset must be an int"):
                await a.pull(MQ, "*", 1.5)  # type: ignore[arg-type]
            with pytest.raises(TypeError, match="mq must be a rmqrun.MessageQueue"):
                await a.pull(("T", "broker-a", 1), "*", 0)  # type: ignore[arg-type]
            with pytest.raises(ValueError, match="has no tags"):
                await a.pull(MQ, "||", 0)
            with pytest.raises(ValueError, match="timeout"):
                await a.pull_block_if_not_found(MQ, "*", 0, timeout=0)
            with pytest.raises(ValueError, match="offset must be between"):
                await a.update_consume_offset(MQ, -5)
            with pytest.raises(ValueError, match="timestamp_ms must be >= 0"):
                await a.search_offset(MQ, -1)
            with pytest.raises(ValueError, match="not a broker .offset. message id"):
                await a.view_message("not-hex")
            with pytest.raises(ValueError, match="topic must be a non-empty string"):
                await a.fetch_subscribe_message_queues("")
            assert a.updated_offsets() == {}  # nothing bad was recorded
    asyncio.run(main())


def test_pull_consumer_cannot_be_pickled() -> None:
    import pickle
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(PullConsumer("127.0.0.1:9"))


def _record(offset: int, tags: str | None) -> bytes:
    props = {"TAGS": tags} if tags is not None else {}
    return bytes(encode_stored(topic="T", body=f"b{offset}".encode(), properties=props, queue_id=1,
                               queue_offset=offset, store_timestamp=1000 + offset))


def test_found_is_filtered_by_tag_string_like_java() -> None:
    assert java_string_hash("Aa") == java_string_hash("BB")  # the broker cannot tell these apart
    body = _record(0, "Aa") + _record(1, "BB") + _record(2, None) + _record(3, "Aa")
    wire = WirePullResult(PullStatus.FOUND, 4, 0, 4, 0, body, "FOUND")
    sub = SubscriptionData.build("T", "Aa")
    result = AsyncPullConsumer._result(MQ, 0, sub, wire)
    assert result.status is PullStatus.FOUND
    assert [(m.queue_offset, m.tags) for m in result.messages] == [(0, "Aa"), (3, "Aa")]
    assert all(m.broker_name == "broker-a" and m.queue_id == 1 for m in result.messages)
    assert (result.next_begin_offset, result.min_offset, result.max_offset) == (4, 0, 4)
    # no MIN_OFFSET/MAX_OFFSET added: the messages keep what was stored
    assert "MIN_OFFSET" not in result.messages[0].properties

    everything = AsyncPullConsumer._result(MQ, 0, SubscriptionData.build("T", "*"), wire)
    assert [m.queue_offset for m in everything.messages] == [0, 1, 2, 3]

    only_bb = AsyncPullConsumer._result(MQ, 0, SubscriptionData.build("T", "BB"), WirePullResult(
        PullStatus.FOUND, 1, 0, 4, 0, _record(0, "Aa"), "FOUND"))
    assert only_bb.status is PullStatus.FOUND and only_bb.messages == []  # found by hash, dropped by string


def test_undecodable_body_names_queue_and_offset() -> None:
    from rmqrun.remoting.errors import ProtocolError
    wire = WirePullResult(PullStatus.FOUND, 1, 0, 1, 0, b"\x00\x00\x00\x10garbage", "FOUND")
    with pytest.raises(ProtocolError, match=re.escape(f"pull of {MQ} from offset 7: a message does not decode")):
        AsyncPullConsumer._result(MQ, 7, SubscriptionData.build("T", "*"), wire)


def test_offset_table_persists_only_what_the_program_updated() -> None:
    t = OffsetTable()
    other = MessageQueue("T", "broker-a", 2)
    t.cache(MQ, 5)
    assert t.get(MQ) == 5 and t.updated() == {}
    t.update(MQ, 3)  # backwards is allowed, as in Java's updateConsumeOffset
    t.cache(MQ, 9)  # a broker read does not overwrite a pending update
    assert t.get(MQ) == 3 and t.updated() == {MQ: 3}
    t.update(other, 1)
    t.persisted(MQ, 3)
    assert t.updated() == {other: 1}
    t.update(other, 2)
    t.persisted(other, 1)  # an older write finishing does not clear a newer update
    assert t.updated() == {other: 2}


def test_sync_consumer_reports_loop_thread_and_stops_it() -> None:
    c = PullConsumer("127.0.0.1:9", timeout=0.5).start()
    threads = c._thread
    assert threads is not None and threads.daemon and threads.is_alive()
    c.close()
    assert not threads.is_alive()
    c.close()  # idempotent


def test_no_namesrv_answering_is_a_clear_error() -> None:
    from rmqrun.client.errors import NameServerUnavailableError
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once closed
    with PullConsumer(f"127.0.0.1:{port}", timeout=1.0) as c:
        with pytest.raises(NameServerUnavailableError, match=f"127.0.0.1:{port}"):
            c.fetch_subscribe_message_queues("T")


class _RecordingBroker:
    """Stands in for BrokerClient: records each pull request and answers NO_NEW_MSG."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, object, float]] = []

    async def pull(self, addr: str, header: object, *, timeout: float) -> WirePullResult:
        self.calls.append((addr, header, timeout))
        return WirePullResult(PullStatus.NO_NEW_MSG, 5, 0, 5, 0, b"", "OFFSET_OVERFLOW_ONE")


def test_pull_requests_carry_the_subscription_and_never_a_commit() -> None:
    from rmqrun.protocol.headers import PULL_FLAG_SUBSCRIPTION, PULL_FLAG_SUSPEND

    async def main() -> list[tuple[str, object, float]]:
        async with AsyncPullConsumer("127.0.0.1:9", "CG_unit", timeout=2.5) as c:
            recorder = _RecordingBroker()
            c._client().broker = recorder  # type: ignore[assignment]

            async def address(mq: MessageQueue, *, broker_id: int = 0) -> str:
                return "127.0.0.1:10911"
            c._address = address  # type: ignore[method-assign]
            await c.update_consume_offset(MQ, 4)  # a pending offset must not ride on the pulls
            await c.pull(MQ, "TagA || TagB", 5, 16)
            await c.pull_block_if_not_found(MQ, None, 5, timeout=7.5)
            c._offsets = OffsetTable()  # nothing to persist at close: there is no broker
            return recorder.calls
    (addr, plain, wait), (_, block, block_wait) = asyncio.run(main())
    assert addr == "127.0.0.1:10911"
    assert plain.sys_flag == PULL_FLAG_SUBSCRIPTION and plain.commit_offset == 0  # type: ignore[attr-defined]
    assert (plain.consumer_group, plain.topic, plain.queue_id, plain.queue_offset, plain.max_msg_nums) == (  # type: ignore[attr-defined]
        "CG_unit", "T", 1, 5, 16)
    assert (plain.subscription, plain.sub_version, plain.expression_type) == ("TagA || TagB", 0, "TAG")  # type: ignore[attr-defined]
    assert wait == 2.5  # the per-request timeout
    assert block.sys_flag == PULL_FLAG_SUBSCRIPTION | PULL_FLAG_SUSPEND and block.commit_offset == 0  # type: ignore[attr-defined]
    assert block.suspend_timeout_millis == 7500 and block.subscription == "*"  # type: ignore[attr-defined]
    assert block_wait > 7.5  # the client waits longer than the broker holds


def test_use_after_fork_fails_instead_of_hanging() -> None:
    import os
    c = PullConsumer("127.0.0.1:9", timeout=0.5).start()
    try:
        pid = os.fork()
        if pid == 0:  # the child: the loop thread did not survive the fork
            try:
                c.max_offset(MQ)
            except RuntimeError as exc:
                os._exit(0 if "after a fork" in str(exc) and isinstance(exc, WrongCallerError) else 3)
            except BaseException:
                os._exit(4)
            os._exit(5)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        c.close()


def test_calls_from_its_own_loop_thread_are_refused_and_the_settings_readable() -> None:
    """A callback running on the consumer's loop thread must not call the blocking API (it would wait on
    itself forever): a clear RuntimeError instead."""
    import concurrent.futures

    with PullConsumer("127.0.0.1:9", "CG_own", timeout=0.5) as c:
        assert (c.namesrv, c.group, c.timeout) == ("127.0.0.1:9", "CG_own", 0.5)
        assert c.client_id is not None and repr(c).startswith("PullConsumer")
        outcome: concurrent.futures.Future[BaseException | None] = concurrent.futures.Future()

        def on_loop() -> None:
            try:
                c.max_offset(MQ)
            except BaseException as exc:  # noqa: BLE001 - handed to the test thread
                outcome.set_result(exc)
            else:
                outcome.set_result(None)
        assert c._loop is not None  # noqa: SLF001
        c._loop.call_soon_threadsafe(on_loop)  # noqa: SLF001
        err = outcome.result(10)
        assert isinstance(err, RuntimeError) and "cannot be called from its own loop thread" in str(err)
        assert isinstance(err, WrongCallerError) and isinstance(err, RmqrunError)  # a named class under the root
