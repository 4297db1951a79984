#!/usr/bin/env python3
"""CPU per popped message of the supervisor's own POP path, without sockets or workers (issue #32).

    PYTHONPATH=$PWD .venv/bin/python scripts/bench_pop_consume_path.py [N] [ROUNDS]
    PYTHONPATH=$PWD BEFORE=/path/to/other/tree .venv/bin/python scripts/bench_pop_consume_path.py

A no-op drain's supervisor figure (``bench_ab_drain.py --pop``) moves by a microsecond a message between
rounds on a shared two-core machine, more than most changes to the POP code are worth. This bench takes the
sockets, the broker and the workers out: an embedded broker (its own process) is popped once for ``N`` 1 KiB
messages of an 8-queue topic and its answers are kept; then, per round, every answer goes through what the
supervisor does with it: ``pop_result_from_response``, a ``PopEntry`` per message (made by the decoder
itself in a tree that takes ``message_class``, as its pop_loop does), the real
``PopConsumeService`` (lanes, jobs, the ``isPopTimeout`` checks, stats) with an executor that answers each
job SUCCESS a few event-loop turns later (as the worker pipe does, so later pops' messages wait and join the
next job, as in a drain), and the real ``AckBatcher`` and ``PopClient.batch_ack_receipts``, whose request a
stub answers SUCCESS. The collector is set as ``rmqrun run`` sets it (``cli.run.collector.settle``).

Printed per round: the CPU (``time.process_time``) per message of the least of ``INNER`` drains in one
interpreter, split into the answers' decode (``pop_result_from_response``), the entries (a ``PopEntry``
each) and the rest (lanes, jobs, stats, acks), and its jobs and ack requests (the split's clock reads, three
a pop answer, add about 0.1 us a message to the whole). With
``BEFORE`` set, the rounds alternate between that tree and this one (each in its own interpreter, the same
answers) and the medians are printed: only same-run comparisons count.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from operator import attrgetter
from pathlib import Path
from typing import Any

from loguru import logger

from rmqrun.cli.run import collector
from rmqrun.client.pop_api import PopClient, pop_result_from_response
from rmqrun.consumer.config import ConsumerConfig
from rmqrun.consumer.consume_services import pop_service
from rmqrun.consumer.executor import JobResult
from rmqrun.consumer.pop_stats import PopStats
from rmqrun.consumer.pop_queue import PopEntry, PopProcessQueue, PopRequest
from rmqrun.consumer.push import ConsumeStats
from rmqrun.consumer.running_info import ConsumeStatusTable
from rmqrun.model import MessageQueue, Status
from rmqrun.remoting.codes import ResponseCode
from rmqrun.remoting.frame import RemotingCommand

#: event-loop turns the stub executor takes per job (the worker pipe's round trip, roughly)
HOPS = 2
#: drains per interpreter in a round; the round's figure is the least of them (other processes' bursts)
INNER = 3
#: what pop_loop makes a message's entry with, in a tree whose decoder makes plain messages
_RECEIPT = attrgetter("receipt")
#: a tree whose decoder makes each message as the consumer's PopEntry (pop_loop's ``message_class``): no
#: entries made apart, so its "entries" figure is 0 and their cost is in the decode's
_MADE_AS_ENTRIES = "message_class" in inspect.signature(pop_result_from_response).parameters


def _capture(n: int, out: Path) -> None:
    """Pop ``n`` messages from a fresh embedded broker and pickle the answers (code, ext fields, body)."""
    from bench_pop_path import _produce

    import rmqrun.client.pop_api as pa
    from rmqrun.broker.app import EmbeddedBroker
    from rmqrun.client.instance import ClientInstance

    caught: list[Any] = []
    decode = pa.pop_result_from_response

    def keep(resp: Any, **kw: Any) -> Any:
        caught.append((resp.code, dict(resp.ext_fields), bytes(resp.body or b"")))
        return decode(resp, **kw)

    pa.pop_result_from_response = keep  # type: ignore[assignment]

    async def main() -> None:
        with tempfile.TemporaryDirectory() as tmp:
            broker = EmbeddedBroker.subprocess(Path(tmp) / "b", flush_mode="async").start()
            try:
                ns, addr = broker.namesrv_address, broker.broker_address
                subprocess.run([sys.executable, "-m", "rmqrun.cli.main", "topic", "create", "P", "--queues", "8",
                                "--namesrv", ns], check=True, capture_output=True)
                await _produce(ns, "P", n)
                inst = ClientInstance(ns, instance_name="bench")
                client = pa.PopClient(inst.broker)
                got, empty = 0, 0
                while got < n and empty < 3:
                    r = await client.pop(addr, group="G", topic="P", broker_name="broker-a", max_msg_nums=32,
                                         invisible_time_ms=300_000, poll_time_ms=0)
                    got += len(r.messages)
                    empty = 0 if r.messages else empty + 1
                await inst.close()
            finally:
                broker.stop()

    asyncio.run(main())
    out.write_bytes(pickle.dumps([c for c in caught if c[0] == 0]))


class _AckBroker:
    """The broker of the ack requests: every one answered SUCCESS at once, counted."""

    acks = 0

    async def request(self, addr: str, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
        _AckBroker.acks += 1
        return RemotingCommand(ResponseCode.SUCCESS, {})


class _Executor:
    """Every job SUCCESS, ``HOPS`` event-loop turns after it came (the worker pipe's round trip)."""

    parallelism = 2
    jobs = 0

    async def run(self, job: Any) -> JobResult:
        _Executor.jobs += 1
        for _ in range(HOPS):
            await asyncio.sleep(0)
        return JobResult([Status.SUCCESS] * len(job), handler_seconds=1e-6 * len(job))


class _Engine:
    """What the POP consume service uses of the supervisor's engine (``pop_consume.PopContext``)."""

    def __init__(self) -> None:
        self.config = ConsumerConfig(group="G", namesrv="127.0.0.1:9876", subscriptions={"P": "*"},
                                     consume_mode="pop").validate()
        self.executor = _Executor()
        self.pop_client = PopClient(_AckBroker())  # type: ignore[arg-type]
        self.pop_stats = PopStats()
        self.stats = ConsumeStats()
        self.status = ConsumeStatusTable()
        self.send_back = None
        self.requests: list[PopRequest] = []
        self.service = pop_service(self.config.mode, self)  # type: ignore[arg-type]

    def pop_requests(self) -> list[PopRequest]:
        return self.requests

    async def broker_addr(self, mq: MessageQueue) -> str:
        return "127.0.0.1:10911"

    async def dead_letter_undecodable(self, *a: Any, **kw: Any) -> bool:
        raise AssertionError("a no-op drain has nothing undecodable")


async def _drain(raw: list[tuple[int, dict[str, str], bytes]]) -> tuple[int, float, float, float]:
    """What the supervisor does with the answers, as pop_loop hands them over: (messages, CPU seconds in all,
    of them in ``pop_result_from_response``, of them making the entries)."""
    engine = _Engine()
    service = engine.service
    mq = MessageQueue("P", "broker-a", -1)
    req = PopRequest(mq, PopProcessQueue(mq))
    engine.requests.append(req)
    now = str(int(time.time() * 1000))
    answers = []
    for code, ext, body in raw:  # popped now: none has lapsed
        cmd = RemotingCommand(code, {**ext, "popTime": now, "invisibleTime": "300000"})
        cmd.body = body
        answers.append(cmd)
    n = 0
    decode = entries = 0.0
    clock = time.process_time
    started = clock()
    for cmd in answers:
        t0 = clock()
        if _MADE_AS_ENTRIES:
            result = pop_result_from_response(cmd, group="G", broker_name="broker-a", message_class=PopEntry)
            popped = made = result.messages
            t1 = t2 = clock()
        else:
            result = pop_result_from_response(cmd, group="G", broker_name="broker-a")
            popped = result.messages
            t1 = clock()
            made = list(map(PopEntry, popped, map(_RECEIPT, popped)))
            t2 = clock()
        decode += t1 - t0
        entries += t2 - t1
        service.submit(req, made, (result.plain_topic, "broker-a"))
        n += len(popped)
        await asyncio.sleep(0)  # one answer per event-loop turn, as reads bring them
    while req.pq.entries or service.in_flight:
        await asyncio.sleep(0)
    return n, clock() - started, decode, entries


def _round(answers_file: Path, rounds: int) -> None:
    """Run the consume path over the answers ``rounds`` times; print one line per drain."""
    logger.remove()
    raw = pickle.loads(answers_file.read_bytes())
    collector.settle()
    for _ in range(rounds):
        _Executor.jobs, _AckBroker.acks = 0, 0
        n, cpu, decode, entries = asyncio.run(_drain(raw))
        print(f"{cpu / n * 1e6:.3f} us/msg (decode {decode / n * 1e6:.2f}, entries {entries / n * 1e6:.2f}, the "
              f"rest {(cpu - decode - entries) / n * 1e6:.2f}; {n} msgs, {_Executor.jobs} jobs, {_AckBroker.acks} "
              "ack requests)", flush=True)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--round":
        _round(Path(sys.argv[2]), int(sys.argv[3]))
        return
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    here = Path(__file__).resolve().parent.parent
    trees = [("after", here)]
    if os.environ.get("BEFORE"):
        trees.insert(0, ("before", Path(os.environ["BEFORE"]).resolve()))
    with tempfile.TemporaryDirectory() as tmp:
        answers = Path(tmp) / "answers.pickle"
        sys.path.insert(0, str(here / "scripts"))
        _capture(n, answers)
        figures: dict[str, list[float]] = {name: [] for name, _ in trees}
        for r in range(rounds):
            for name, tree in trees:
                env = {**os.environ, "PYTHONPATH": str(tree)}
                lines = subprocess.run([sys.executable, str(here / "scripts" / Path(__file__).name), "--round",
                                        str(answers), str(INNER)], env=env, capture_output=True, text=True,
                                       check=True, cwd=tree).stdout.strip().splitlines()
                out = min(lines, key=lambda line: float(line.split()[0]))  # the least disturbed of its drains
                figures[name].append(float(out.split()[0]))
                print(f"round {r + 1} {name:6} {out}  load {os.getloadavg()[0]:.1f}", flush=True)
        for name, values in figures.items():
            print(f"{name:6} median {statistics.median(values):.3f} us/msg (min {min(values):.3f})")


if __name__ == "__main__":
    main()
