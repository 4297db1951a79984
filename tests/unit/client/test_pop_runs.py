"""The messages of one pop answer's run share a ``PopRun``, and their acks go as ``RunReceipts`` (the run and
its messages' offsets, no receipt made per message): what the broker gets must be what the same receipts,
one per message, give, byte for byte, and a run's word must refuse what a receipt's refuses."""

from __future__ import annotations

import asyncio
import random

import pytest

from rmqrun.client.pop_api import PopClient, PopRun, RunReceipts
from rmqrun.protocol.pop import ReceiptHandle
from rmqrun.protocol.pop_batch_ack import BatchAck, encode_batch_ack_body, encode_batch_ack_checkpoints
from rmqrun.remoting.codes import ResponseCode
from rmqrun.remoting.frame import RemotingCommand


class _Recorder:
    def __init__(self) -> None:
        self.sent: list[RemotingCommand] = []

    async def request(self, addr: str, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
        self.sent.append(cmd)
        return RemotingCommand(ResponseCode.SUCCESS, {})


def _run(start: int, queue: int = 1, pop_time: int = 1795500243867, flag: str = "0", topic: str = "T") -> PopRun:
    return PopRun(topic, topic, (start, pop_time, 60_000, 3, flag, "broker-5x", queue), pop_time)


@pytest.mark.parametrize("seed", range(20))
def test_the_checkpoint_encoder_writes_what_the_general_body_encoder_writes(seed: int) -> None:
    rng = random.Random(seed)
    names = ["T", 'q"uote', "back\\slash", "ünï", "tab\there", "%RETRY%G_T"]
    checkpoints = [(rng.choice(names), ReceiptHandle(rng.randrange(10**12), rng.randrange(10**13), rng.randrange(10**6),
                                                     rng.randrange(16), rng.choice("012"), "b", rng.randrange(64),
                                                     rng.randrange(10**12)), rng.randrange(1, 2**300))
                   for _ in range(rng.randrange(0, 6))]
    group = rng.choice(names)
    for broker in ("broker-a", 'b"x', None):
        assert encode_batch_ack_checkpoints(broker, group, checkpoints) == encode_batch_ack_body(
            broker, [BatchAck.for_receipt(group, topic, f, word) for topic, f, word in checkpoints])


def test_run_receipts_are_acked_as_the_same_receipts_one_per_message() -> None:
    a, b, retried = _run(10), _run(40, pop_time=5), _run(0, queue=0, flag="1")

    def groups(as_runs: bool) -> list[tuple[str, object]]:
        parts = [("T", a, [10, 11]), ("T", a, [13]), ("T", b, [40, 41, 45]), ("T", retried, [2])]
        out = [(topic, RunReceipts(run, offsets) if as_runs else [run.receipt(o) for o in offsets])
               for topic, run, offsets in parts]
        return out + [("OtherT", [_run(10).receipt(14)])]  # a group of receipts beside them

    async def main() -> list[bytes]:
        rec = _Recorder()
        client = PopClient(rec)  # type: ignore[arg-type]
        for as_runs in (True, False):
            await client.batch_ack_receipts("addr", group="G", broker_name="broker-5x",
                                            groups=groups(as_runs))  # type: ignore[arg-type]
        return [bytes(cmd.body or b"") for cmd in rec.sent]

    by_runs, by_receipts = asyncio.run(main())
    assert by_runs == by_receipts
    run_receipts = RunReceipts(a, [10, 11, 13])
    assert list(run_receipts) == [a.receipt(10), a.receipt(11), a.receipt(13)] == [
        ReceiptHandle(10, 1795500243867, 60_000, 3, "0", "broker-5x", 1, o) for o in (10, 11, 13)]
    assert list(run_receipts[1:]) == [a.receipt(11), a.receipt(13)] and len(run_receipts) == 3


def test_a_run_offset_before_its_checkpoints_start_is_refused_as_a_receipts_is() -> None:
    run = _run(10)

    async def main(receipts: object) -> None:
        await PopClient(_Recorder()).batch_ack_receipts(  # type: ignore[arg-type]
            "addr", group="G", broker_name="broker-5x", groups=[("T", receipts)])  # type: ignore[list-item]

    for receipts in (RunReceipts(run, [11, 9]), [run.receipt(11), run.receipt(9)]):
        with pytest.raises(ValueError, match="before its checkpoint's start"):
            asyncio.run(main(receipts))


def test_the_general_reader_gives_messages_of_one_checkpoint_but_two_topics_their_own_topics() -> None:
    from rmqrun.client.pop_api import pop_result_from_response
    from rmqrun.remoting.message import encode_stored

    records = [encode_stored(topic=topic, body=b"x", queue_id=0, queue_offset=offset)
               for topic, offset in (("A", 10), ("B", 11), ("A", 12))]
    resp = RemotingCommand(ResponseCode.SUCCESS, {"popTime": "1795500243867", "invisibleTime": "60000",
                                                  "reviveQid": "3", "restNum": "0", "startOffsetInfo": "0 0 10"},
                           body=b"".join(records))
    messages = pop_result_from_response(resp, group="G", broker_name="broker-a").messages
    assert [(m.topic, m.ack_topic, m.receipt.ck_start_offset, m.queue_offset) for m in messages] == [
        ("A", "A", 10, 10), ("B", "B", 10, 11), ("A", "A", 10, 12)]
    assert messages[0].run is messages[2].run and messages[1].run is not messages[0].run
