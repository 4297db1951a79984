#!/usr/bin/env python3
"""The embedded broker's own CPU per popped-and-acked message against per pulled message, in one process
(issue #32): no client, no socket, no event-loop turns in the figures.

    PYTHONPATH=$PWD .venv/bin/python scripts/bench_pop_broker.py --messages 20000 --rounds 3
    PYTHONPATH=$PWD .venv/bin/python scripts/bench_pop_broker.py --ack single --profile

An in-process :class:`EmbeddedBroker` gets two 8-queue topics with ``--messages`` 1 KiB messages each (sent
through a real producer). Then per round, with a fresh group: pops of 32 (``queue_id`` -1, no long poll) until
three come back empty, each acked at once, one BATCH_ACK_MESSAGE per pop (``--ack batch``, what rmqrun's POP
consumer sends) or one ACK_MESSAGE per message (``--ack single``); then 8 bare pull loops of 32 over the
other topic. Only the broker's part is timed (``time.process_time``): the request frame's decode, the
processor (for a pop, in SYNC flush mode, its wait for the checkpoint log's fsync included), the answer
frame's encode. Building the requests and reading the answers (the client's part) are outside the timing.
So the per-message figures are what ``scripts/bench_pop_path.py`` shows for the broker process minus the
transport and the loop's own work per request. Same-run ratios only: the machine's load moves all of them.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import tempfile
import time
from pathlib import Path
from typing import Any

from rmqrun.broker.app import EmbeddedBroker
from rmqrun.client.pop_api import pop_result_from_response
from rmqrun.client.producer import Producer
from rmqrun.protocol.pop import AckMessageRequestHeader, PopMessageRequestHeader
from rmqrun.protocol.pop_batch_ack import BatchAck, batch_ack_words, encode_batch_ack_body
from rmqrun.remoting import frame as codec
from rmqrun.remoting.codes import RequestCode, ResponseCode
from rmqrun.remoting.frame import RemotingCommand

QUEUES = 8
BATCH = 32


class _Conn:
    """What the processors read of a connection (its name, for a refusal's text; never held here)."""

    name = "bench"
    closed = False


class _Timer:
    def __init__(self, profile: cProfile.Profile | None) -> None:
        self.profile = profile
        self.spent = 0.0

    async def serve(self, handler: Any, request: RemotingCommand) -> RemotingCommand:
        """The request as the broker reads it off the wire, handled, its answer encoded: timed."""
        raw = codec.encode(request)[4:]
        t0 = time.process_time()
        if self.profile is not None:
            self.profile.enable()
        cmd = codec.decode(raw)
        resp = await handler(_Conn(), cmd)
        frame = codec.encode(resp)
        if self.profile is not None:
            self.profile.disable()
        self.spent += time.process_time() - t0
        return codec.decode(frame[4:])


async def _produce(namesrv: str, topic: str, n: int) -> None:
    async with Producer(namesrv, "PG") as p:
        body = b"x" * 1024
        for i in range(0, n, 64):
            await asyncio.gather(*(p.send(topic, body) for _ in range(i, min(n, i + 64))))


def _acks(ack: str, group: str, broker_name: str, messages: list[Any]) -> list[RemotingCommand]:
    if ack == "single":
        return [RemotingCommand(RequestCode.ACK_MESSAGE, AckMessageRequestHeader(
            consumer_group=group, topic=m.ack_topic, queue_id=m.receipt.queue_id, extra_info=m.receipt.encode(),
            offset=m.receipt.queue_offset, bname=broker_name).to_ext()) for m in messages]
    body = encode_batch_ack_body(broker_name, [BatchAck.for_receipt(group, "TPOP", f, word)
                                               for f, word in batch_ack_words([m.receipt for m in messages])])
    return [RemotingCommand(RequestCode.BATCH_ACK_MESSAGE, {}, body=body)]


async def _pop_round(eb: EmbeddedBroker, group: str, ack: str, pop_t: _Timer, ack_t: _Timer) -> int:
    procs, bn = eb.broker.processors, eb.broker.config.broker_name
    ext = PopMessageRequestHeader(consumer_group=group, topic="TPOP", queue_id=-1, max_msg_nums=BATCH,
                                  invisible_time=60_000, poll_time=0, born_time=0, init_mode=0,
                                  bname=bn).to_ext()
    got = empty = 0
    while empty < 3:
        ext["bornTime"] = str(int(time.time() * 1000))
        resp = await pop_t.serve(procs.pop.pop_message, RemotingCommand(RequestCode.POP_MESSAGE, dict(ext)))
        messages = pop_result_from_response(resp, group=group, broker_name=bn).messages
        if not messages:
            empty += 1
            continue
        got += len(messages)
        handler = procs.pop_ack.ack_message if ack == "single" else procs.pop_ack.batch_ack_message
        for request in _acks(ack, group, bn, messages):
            answer = await ack_t.serve(handler, request)
            if answer.code != ResponseCode.SUCCESS:
                raise SystemExit(f"ack refused: {answer.code} {answer.remark}")
    return got


async def _pull_round(eb: EmbeddedBroker, group: str, timer: _Timer) -> int:
    got = 0
    for q in range(QUEUES):
        off = 0
        while True:
            ext = {"consumerGroup": group, "topic": "TPULL", "queueId": str(q), "queueOffset": str(off),
                   "maxMsgNums": str(BATCH), "sysFlag": "5", "commitOffset": str(off),
                   "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0", "expressionType": "TAG"}
            resp = await timer.serve(eb.broker.processors.pull.pull, RemotingCommand(RequestCode.PULL_MESSAGE, ext))
            nxt = int(resp.ext_fields["nextBeginOffset"])
            if nxt <= off:
                break
            got, off = got + nxt - off, nxt
    return got


async def main(args: argparse.Namespace) -> None:
    async with EmbeddedBroker(Path(tempfile.mkdtemp()) / "b", flush_mode=args.flush) as eb:
        assert eb.broker.topics is not None
        for topic in ("TPOP", "TPULL"):
            eb.broker.topics.create_for_send_back(topic, QUEUES)
            await _produce(eb.namesrv_address, topic, args.messages)
        profile = cProfile.Profile() if args.profile else None
        for rnd in range(args.rounds):
            pop_t, ack_t, pull_t = _Timer(profile), _Timer(profile), _Timer(None)
            popped = await _pop_round(eb, f"GO{rnd}", args.ack, pop_t, ack_t)
            pulled = await _pull_round(eb, f"GP{rnd}", pull_t)
            pop_us, ack_us = pop_t.spent / popped * 1e6, ack_t.spent / popped * 1e6
            pull_us = pull_t.spent / pulled * 1e6
            print(f"round {rnd}: popped {popped}: pop {pop_us:.2f} + {args.ack} ack {ack_us:.2f} = "
                  f"{pop_us + ack_us:.2f} us/msg; pulled {pulled}: {pull_us:.2f} us/msg; "
                  f"pop+ack / pull {(pop_us + ack_us) / pull_us:.2f}", flush=True)
        if profile is not None:
            pstats.Stats(profile).sort_stats(args.sort).print_stats(40)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=20_000, help="per topic (default 20000)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ack", choices=("batch", "single"), default="batch",
                        help="one BATCH_ACK_MESSAGE per pop, or one ACK_MESSAGE per message")
    parser.add_argument("--flush", choices=("async", "sync"), default="async")
    parser.add_argument("--profile", action="store_true", help="cProfile the timed pop and ack work")
    parser.add_argument("--sort", default="tottime", help="the profile's order (default tottime)")
    asyncio.run(main(parser.parse_args()))
