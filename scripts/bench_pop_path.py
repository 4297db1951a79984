#!/usr/bin/env python3
"""CPU per message of POP's wire path against pull's, broker and client side by side (issue #32).

    PYTHONPATH=$PWD .venv/bin/python scripts/bench_pop_path.py 20000
    PYTHONPATH=$PWD MODES=pull,pop,pull,pop .venv/bin/python scripts/bench_pop_path.py 20000

An embedded broker in its own process (async flush) gets two 8-queue topics with ``N`` 1 KiB messages each.
Then, in the rounds ``MODES`` names (alternating, a fresh group each round so the backlog is there again):

* ``pull``: 8 bare pull loops (one per queue, 32 per request), nothing decoded beyond the next offset;
* ``pop``: 4 pop loops (``queue_id`` -1, 32 per pop) on this process's :class:`PopClient`, each pop decoded
  into PoppedMessages (``pop_result_from_response``) and acked with one BATCH_ACK_MESSAGE.

Per round it prints the broker process's CPU (psutil user+system) and this process's CPU
(``time.process_time``), each per message, and the wall time (pops do not long-poll: the backlog is all
there, and a loop stops at its third empty answer, so no idle hold inflates either figure). An ``idle``
round sleeps one second and prints the broker's CPU in that second: its background cost, which any
round's per-message figure includes for its duration. Only same-run ratios count; the load
average is printed before every round (``BROKER_PY``: another interpreter for the broker, e.g. a profiler
wrapper).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from rmqrun.broker.app import EmbeddedBroker
from rmqrun.client.instance import ClientInstance
from rmqrun.client.pop_api import PopClient, PopStatus
from rmqrun.client.producer import Producer
from rmqrun.protocol.headers import PullMessageRequestHeader

QUEUES = 8
BATCH = 32
POP_LOOPS = 4


def _cpu(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return t.user + t.system


async def _produce(namesrv: str, topic: str, n: int) -> None:
    async with Producer(namesrv, "PG") as p:
        body = b"x" * 1024
        for i in range(0, n, 64):
            await asyncio.gather(*(p.send(topic, body, keys=f"k{j}") for j in range(i, min(n, i + 64))))


async def _pull_all(inst: ClientInstance, addr: str, topic: str, group: str) -> int:
    got = 0

    async def one(q: int) -> None:
        nonlocal got
        off = 0
        while True:
            h = PullMessageRequestHeader(consumer_group=group, topic=topic, queue_id=q, queue_offset=off,
                                         max_msg_nums=BATCH, sys_flag=0x1 | 0x4, commit_offset=off,
                                         suspend_timeout_millis=0, subscription="*", sub_version=0,
                                         expression_type="TAG")
            r = await inst.broker.pull(addr, h)
            if r.next_begin_offset <= off:
                return
            got += r.next_begin_offset - off
            off = r.next_begin_offset
    await asyncio.gather(*(one(q) for q in range(QUEUES)))
    return got


async def _pop_all(inst: ClientInstance, addr: str, topic: str, broker_name: str, group: str, n: int) -> int:
    pc = PopClient(inst.broker)
    got = 0
    empty = 0

    async def loop() -> None:
        nonlocal got, empty
        while got < n and empty < 3:
            r = await pc.pop(addr, group=group, topic=topic, broker_name=broker_name, max_msg_nums=BATCH,
                             invisible_time_ms=60_000, poll_time_ms=0)
            if r.status is not PopStatus.FOUND:
                empty += 1
                continue
            got += len(r.messages)
            await pc.batch_ack(addr, group=group, broker_name=broker_name,
                               acks=[(m, m.receipt) for m in r.messages])
    await asyncio.gather(*(loop() for _ in range(POP_LOOPS)))
    return got


async def main(n: int, modes: list[str]) -> None:
    bp = EmbeddedBroker.subprocess(Path(tempfile.mkdtemp()) / "b", flush_mode="async",
                                   python=os.environ.get("BROKER_PY")).start()
    try:
        ns, addr = bp.namesrv_address, bp.broker_address
        for t in ("TPULL", "TPOP"):
            subprocess.run([sys.executable, "-m", "rmqrun.cli.main", "topic", "create", t, "--queues", str(QUEUES),
                            "--namesrv", ns], check=True, capture_output=True)
            await _produce(ns, t, n)
        inst = ClientInstance(ns, instance_name="bench")
        proc = psutil.Process(bp.pid)
        for rnd, mode in enumerate(modes):
            load = os.getloadavg()[0]
            c0, t0, me0 = _cpu(proc), time.perf_counter(), time.process_time()
            if mode == "idle":
                await asyncio.sleep(1.0)
                print(f"idle: broker {(_cpu(proc) - c0) * 1e3:.1f} ms CPU in 1 s (load {load:.1f})", flush=True)
                continue
            if mode == "pull":
                got = await _pull_all(inst, addr, "TPULL", f"GP{rnd}")
            else:
                got = await _pop_all(inst, addr, "TPOP", "broker-a", f"GO{rnd}", n)
            dt, dc, dme = time.perf_counter() - t0, _cpu(proc) - c0, time.process_time() - me0
            print(f"{mode}: {got} msgs in {dt:.2f}s; broker {dc / got * 1e6:.1f} us/msg; "
                  f"client {dme / got * 1e6:.1f} us/msg (load {load:.1f})", flush=True)
        await inst.close()
    finally:
        bp.stop()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 20_000,
                     [m for m in os.environ.get("MODES", "pull,pop,pull,pop").split(",") if m]))
