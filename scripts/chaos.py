#!/usr/bin/env python3
"""Chaos suite: a real workload under random faults, then an audit of every message.

    python scripts/chaos.py --minutes 2 --seed 7

What runs (all real processes, loopback only):

* one ``rmqrun broker`` (sync flush) on fixed free ports, registering the address
  ``127.0.0.2:<broker port>`` so that clients reach it through the suite's TCP proxy
  (:mod:`chaos_proxy`), which forwards ``127.0.0.2`` to the broker's ``127.0.0.1``;
* producers in this process, sending with sharding keys (each key's messages in
  order to one queue), a few marked to make the handler raise, hang past its time
  limit or leak memory (``workers/chaos.py``);
* three consumer groups on the same topic at once, a concurrent one, an orderly one and a
  POP one (``--consume-mode pop``, the group switched to POP on the broker: :mod:`chaos_pop`),
  each with one ``rmqrun run`` instance always configured and up to two more joining
  and leaving; every handler call is recorded to a file.

Faults, one at a time, in an order drawn from ``--seed``; each is followed by a wait
for its recovery condition (the process is back and consuming, the broker is ready,
rmqrun closed a half-open connection) and then for every group to complete
``--progress`` to twice as many more messages, so their timing depends on what the system does, not on
the clock: ``worker_kill`` (SIGKILL of a worker), ``run_kill`` / ``run_term`` (SIGKILL of
a whole ``rmqrun run``, or SIGTERM, then a restart), ``join_leave`` (another instance
joins a group, or one leaves), ``broker_kill`` (``kill -9`` of the broker, restart on the
same data), ``proxy_cut`` / ``proxy_stall`` / ``proxy_half_open`` (connections between
rmqrun and the broker reset, paused, or left open with no answer).

After ``--minutes``, the faults stop, every instance but the first of each group leaves,
the producers stop, and the suite waits until every stored message is completed by both
groups and every committed offset is at its queue's max offset (``--settle-timeout`` seconds
without a message completed ends a run that would never get there). Then the audit (:mod:`chaos_audit`) prints a table per
fault kind and a one-line verdict; the exit status is 1 on any loss, order violation,
unexplained message in ``%RETRY%``/``%DLQ%``, offset left behind or unbounded memory, 0 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from chaos_audit import (  # noqa: E402
    Fault, GroupAudit, KindRow, RecordTail, Stored, audit_group, handler_fault_rows, read_calls,
)
from chaos_pop import POP_GROUP, group_settings, retry_topics, set_pop_mode  # noqa: E402
from chaos_procs import BrokerProc, RunProc, free_port, free_port_pair, wait_until  # noqa: E402
from chaos_proxy import ChaosProxy  # noqa: E402
from chaos_report import report  # noqa: E402

BROKER_HOST = "127.0.0.1"
PROXY_HOST = "127.0.0.2"
TOPIC = "ChaosOrders"
QUEUES = 8
GROUPS = (("chaos_concurrent", False), ("chaos_orderly", True), (POP_GROUP, False))
SLOTS = ("a", "b", "c")
FAULT_KINDS = ("worker_kill", "run_kill", "run_term", "join_leave", "broker_kill", "proxy_cut", "proxy_stall",
               "proxy_half_open")
HANDLER_KINDS = ("handler_raise", "handler_hang", "handler_leak")


@dataclass
class Options:
    minutes: float
    seed: int
    rate: float
    keys: int
    workers: int
    progress: int
    settle_timeout: float
    half_open_limit: float
    workdir: Path
    keep: bool
    json_out: Path | None
    max_worker_mb: int
    leak_mb: int
    max_supervisor_mb: int


@dataclass
class ProducerStats:
    acked: list[tuple[str, int, int]] = field(default_factory=list)  # (msg id, queue, offset)
    failures: int = 0
    sent: int = 0


class Chaos:
    """One run: the processes, the proxy, the producers, the fault loop and the audit."""

    def __init__(self, opts: Options) -> None:
        self.o = opts
        self.rng = random.Random(opts.seed)
        self.work = opts.workdir
        (self.work / "markers").mkdir(parents=True, exist_ok=True)
        self.namesrv_port = free_port_pair((BROKER_HOST, PROXY_HOST))
        self.broker_port = free_port_pair((BROKER_HOST, PROXY_HOST))
        self.namesrv = f"{PROXY_HOST}:{self.namesrv_port}"
        self.broker = BrokerProc(self.work, host=BROKER_HOST, advertise_host=PROXY_HOST,
                                 namesrv_port=self.namesrv_port, broker_port=self.broker_port)
        self.proxy = ChaosProxy(PROXY_HOST, BROKER_HOST, {"namesrv": self.namesrv_port, "broker": self.broker_port})
        self.instances: dict[str, list[RunProc]] = {}
        self.tails = {g: RecordTail(self.work / f"handled-{g}.log") for g, _ in GROUPS}
        self.faults: list[Fault] = []
        self.notes: list[str] = []
        self.unexpected_exits: list[str] = []
        self.producer = ProducerStats()
        self.stop_producing = asyncio.Event()
        self.rss_max = {"supervisor": 0, "worker": 0, "broker": 0}
        self.rss_first: dict[str, int] = {}
        self.rss_last: dict[str, int] = {}
        for group, orderly in GROUPS:
            self.instances[group] = [
                RunProc(self.work, f"{group}-{slot}", group=group, topic=TOPIC, namesrv=self.namesrv, orderly=orderly,
                        workers=opts.workers, settings={**self._settings(slot), **group_settings(group)},
                        handler_env={"RMQRUN_HANDLER_CHAOS_DIR": str(self.work),
                                     "RMQRUN_HANDLER_CHAOS_GROUP": group,
                                     "RMQRUN_HANDLER_CHAOS_LEAK_MB": str(opts.leak_mb)})
                for slot in SLOTS]

    def _settings(self, slot: str) -> dict[str, str]:
        settings = {
            "RMQRUN_CONSUME_FROM_WHERE": "CONSUME_FROM_FIRST_OFFSET",
            "RMQRUN_PERSIST_OFFSET_INTERVAL_MS": "1000",
            "RMQRUN_REBALANCE_INTERVAL_MS": "5000",
            "RMQRUN_HEARTBEAT_INTERVAL_MS": "10000",
            "RMQRUN_CONSUME_TIMEOUT_MINUTES": "0.05",  # 3 s: the "hang" handler runs past it
            "RMQRUN_KILL_GRACE": "5",
            "RMQRUN_MAX_MEMORY_PER_WORKER": f"{self.o.max_worker_mb}MiB",
            "RMQRUN_STATUS_INTERVAL": "0",
            "RMQRUN_LOG_LEVEL": "INFO",
        }
        if slot == "a":
            # the first instance keeps its client id across restarts (as a deployment with a fixed
            # instance name does), the others get a new one each start (Java's pid default), so both
            # paths of orderly lock ownership are exercised: re-lock at once, and wait for expiry
            settings["RMQRUN_INSTANCE_NAME"] = f"chaos-{slot}"
        return settings

    # ------------------------------------------------------------------ workload

    async def produce(self) -> None:
        from rmqrun.client.producer import Producer
        bucket = asyncio.Semaphore(0)
        next_idx = [0]

        async def refill() -> None:
            while not self.stop_producing.is_set():
                await asyncio.sleep(1.0 / self.o.rate)
                bucket.release()

        async def key_loop(producer: Producer, key: int) -> None:
            while not self.stop_producing.is_set():
                await bucket.acquire()
                if self.stop_producing.is_set():
                    return
                idx = next_idx[0]
                next_idx[0] += 1
                # about 1 % of the messages misbehave, drawn from the seed; messages 50, 100 and 150 always do,
                # so every run has each handler fault whatever its seed and length
                mark = {50: 0.0, 100: 0.006, 150: 0.008}.get(idx, random.Random(f"{self.o.seed}-{idx}").random())
                props = {"idx": str(idx)}
                if mark < 0.005:
                    props["CHAOS"] = "raise"
                elif mark < 0.007:
                    props["CHAOS"] = "hang"
                elif mark < 0.010:
                    props["CHAOS"] = "leak"
                while True:  # a key's next message waits until this one is stored: per-key order
                    try:
                        self.producer.sent += 1
                        r = await producer.send(TOPIC, f"chaos-{idx}".encode(), tags="chaos", keys=f"idx-{idx}",
                                                properties=props, sharding_key=f"key-{key}")
                        if r.status.name == "SEND_OK":
                            self.producer.acked.append((r.msg_id, r.queue.queue_id, r.queue_offset))
                            break
                        self.producer.failures += 1
                    except Exception:  # the broker is down or the send timed out: try again
                        self.producer.failures += 1
                    if self.stop_producing.is_set():
                        return
                    await asyncio.sleep(0.3)

        async def release_on_stop() -> None:
            await self.stop_producing.wait()
            for _ in range(self.o.keys):  # wake every key loop waiting for a token, so it sees the stop
                bucket.release()

        async with Producer(self.namesrv, "chaos_producer") as producer:
            helpers = [asyncio.ensure_future(refill()), asyncio.ensure_future(release_on_stop())]
            await asyncio.gather(*(key_loop(producer, k) for k in range(self.o.keys)))
            for h in helpers:
                h.cancel()

    async def create_topic(self) -> None:
        from rmqrun.client.admin import AdminClient, TopicConfig
        from rmqrun.client.instance import ClientInstance
        inst = ClientInstance(self.namesrv, instance_name="chaos-admin")
        try:
            admin = AdminClient(inst.pool, inst.namesrv)
            for addr in (await admin.cluster_info()).all_masters():
                await admin.create_or_update_topic(addr, TopicConfig(TOPIC, QUEUES, QUEUES))
        finally:
            await inst.close()

    # ------------------------------------------------------------------ progress and memory

    def completed(self) -> dict[str, int]:
        return {g: t.poll() for g, t in self.tails.items()}

    async def wait_progress(self, n: int, deadline: float) -> bool:
        """Until every group completed ``n`` more messages (False if ``deadline`` passed first)."""
        base = self.completed()
        while True:
            now = self.completed()
            if all(now[g] - base[g] >= n for g in now):
                return True
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(0.2)

    async def sample_memory(self) -> None:
        while True:
            for group, slots in self.instances.items():
                for run in slots:
                    sup, workers = run.rss()
                    if sup:
                        self.rss_max["supervisor"] = max(self.rss_max["supervisor"], sup)
                        self.rss_first.setdefault(run.name, sup)
                        self.rss_last[run.name] = sup
                    if workers:
                        self.rss_max["worker"] = max(self.rss_max["worker"], *workers)
            self.rss_max["broker"] = max(self.rss_max["broker"], self.broker.rss())
            await asyncio.sleep(1.0)

    async def check_unexpected_exits(self) -> None:
        """An instance that should run but has exited on its own is a finding; it is restarted, so the run goes on."""
        for slots in self.instances.values():
            for run in slots:
                if run.proc is not None and run.wanted and not run.running:
                    code = run.proc.returncode
                    self.unexpected_exits.append(f"{run.name} exited by itself with {code}; log tail:\n"
                                                 + run.log()[-1500:])
                    await self.start_run(run)

    async def start_run(self, run: RunProc) -> None:
        run.start()
        run.wanted = True
        await run.wait_consuming()

    async def stop_run(self, run: RunProc) -> int:
        run.wanted = False
        return await run.term()

    # ------------------------------------------------------------------ faults

    def running_runs(self) -> list[RunProc]:
        return [r for slots in self.instances.values() for r in slots if r.running]

    async def inject(self, kind: str) -> Fault:
        rng = self.rng
        fault = Fault(kind, "", time.time())
        self.faults.append(fault)
        if kind == "worker_kill":
            candidates = [r for r in self.running_runs() if r.worker_pids()]
            if candidates:
                run = rng.choice(candidates)
                pid = rng.choice(sorted(run.worker_pids()))
                fault.detail = f"SIGKILL worker {pid} of {run.name}"
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    fault.detail += " (already gone)"
                await wait_until(lambda: not run.running or len(run.worker_pids()) >= self.o.workers, 120,
                                 f"{run.name} to replace its worker")
        elif kind in ("run_kill", "run_term"):
            run = rng.choice(self.running_runs())
            if kind == "run_kill":
                run.wanted = False
                run.kill9()
                fault.detail = f"SIGKILL {run.name} (supervisor and workers), restart"
            else:
                code = await self.stop_run(run)
                fault.detail = f"SIGTERM {run.name} (exit {code}), restart"
                if code != 0:
                    self.notes.append(f"{run.name} exited with {code} on SIGTERM")
            await self.start_run(run)
        elif kind == "join_leave":
            group = rng.choice([g for g, _ in GROUPS])
            slots = self.instances[group]
            extras_up = [r for r in slots[1:] if r.running]
            extras_down = [r for r in slots[1:] if not r.running]
            if extras_down and (not extras_up or rng.random() < 0.5):
                run = extras_down[0]
                fault.detail = f"{run.name} joins {group}"
                await self.start_run(run)
            else:
                run = rng.choice(extras_up)
                code = await self.stop_run(run)
                fault.detail = f"{run.name} leaves {group} (SIGTERM, exit {code})"
        elif kind == "broker_kill":
            fault.detail = "kill -9 the broker, restart on the same data"
            self.broker.kill9()
            await self.broker.start()
        elif kind == "proxy_cut":
            links = self.proxy.rmqrun_links()
            chosen = links if rng.random() < 0.5 else rng.sample(links, max(1, len(links) // 2)) if links else []
            fault.detail = f"reset {self.proxy.cut(chosen)} of {len(links)} rmqrun connections"
        elif kind == "proxy_stall":
            links = self.proxy.rmqrun_links()
            seconds = rng.uniform(2.0, 8.0)
            fault.detail = f"stall {self.proxy.stall(links)} rmqrun connections for {seconds:.1f} s"
            await asyncio.sleep(seconds)
            self.proxy.resume()
        elif kind == "proxy_half_open":
            links = self.proxy.rmqrun_links()
            chosen = rng.sample(links, max(1, len(links) // 2)) if links else []
            n = self.proxy.half_open(chosen, self.o.half_open_limit)
            fault.detail = f"half-open {n} of {len(links)} rmqrun connections"
            before_unnoticed = self.proxy.half_open_unnoticed
            await wait_until(lambda: self.proxy.half_open_pending() == 0, self.o.half_open_limit + 30,
                             "half-open connections to be closed")
            unnoticed = self.proxy.half_open_unnoticed - before_unnoticed
            if unnoticed:
                fault.detail += f" ({unnoticed} not closed by rmqrun within {self.o.half_open_limit:g} s: reset)"
        fault.t_recovered = time.time()
        return fault

    async def chaos_phase(self) -> None:
        end = time.monotonic() + self.o.minutes * 60
        order = list(FAULT_KINDS)
        self.rng.shuffle(order)  # every kind once first (in a seeded order), then at random
        stuck_after = max(300.0, self.o.half_open_limit * 3)
        while time.monotonic() < end or order:  # the time is up once every kind was injected
            gap = int(self.o.progress * self.rng.uniform(1.0, 2.0))
            if not await self.wait_progress(gap, time.monotonic() + stuck_after):
                self.notes.append(f"no progress for {stuck_after:g} s before a fault at "
                                  f"{time.strftime('%H:%M:%S')}: completed {self.completed()}")
                break
            if self.faults:
                self.faults[-1].t_end = time.time()
            if time.monotonic() >= end and not order:
                break
            await self.check_unexpected_exits()
            kind = order.pop(0) if order else self.rng.choice(FAULT_KINDS)
            fault = await self.inject(kind)
            print(f"[{time.strftime('%H:%M:%S')}] {fault.kind}: {fault.detail}", flush=True)
        if self.faults and not self.faults[-1].t_end:
            self.faults[-1].t_end = time.time()

    # ------------------------------------------------------------------ settling and the broker's view

    async def settle(self) -> bool:
        """Faults off, extras leave, producers stop; until all is consumed and committed (False on timeout)."""
        self.proxy.resume()
        if self.broker.proc is None or self.broker.proc.poll() is not None:
            await self.broker.start()
        leave = Fault("join_leave", "the extra instances leave at the end", time.time())
        self.faults.append(leave)
        for slots in self.instances.values():
            for run in slots[1:]:
                if run.running:
                    await self.stop_run(run)
            if not slots[0].running:
                await self.start_run(slots[0])
        leave.t_recovered = time.time()
        self.stop_producing.set()
        await self.producing
        leave.t_end = time.time()
        deadline = time.monotonic() + self.o.settle_timeout
        said = 0.0
        why = "not checked"
        last = sum(self.completed().values())
        while time.monotonic() < deadline:
            now = sum(self.completed().values())
            if now > last:  # still working through the backlog: the bound counts from the last progress
                last = now
                deadline = time.monotonic() + self.o.settle_timeout
            await self.check_unexpected_exits()
            try:
                why = await self.not_drained()
            except Exception as exc:  # a timeout under load: ask again
                why = f"drain check failed: {exc!r}"
            if not why:
                return True
            if time.monotonic() - said > 30:
                said = time.monotonic()
                print(f"[{time.strftime('%H:%M:%S')}] settling: {why}", flush=True)
            await asyncio.sleep(2.0)
        self.notes.append(f"still not drained, nothing completed for {self.o.settle_timeout:g} s: {why}")
        return False

    async def not_drained(self) -> str:
        """Why the run is not finished yet ("" once every group completed everything and committed it)."""
        stored = await self.read_topic(TOPIC)
        ids = {m.msg_id for m in stored}
        for group, _ in GROUPS:
            done = {c.msg_id for c in read_calls(self.work / f"handled-{group}.log") if c.event == "ok"}
            if ids - done:
                return f"{group} has {len(ids - done)} of {len(ids)} stored messages to complete"
            offsets = await self.offsets(group)
            behind = {q: v for q, v in offsets.items() if v[0] != v[1]}
            if behind:
                return f"{group} committed offsets behind: {behind}"
        return ""

    async def read_topic(self, topic: str) -> list[Stored]:
        from rmqrun.pull import AsyncPullConsumer
        from rmqrun.pull.errors import TopicNotFoundError
        from rmqrun.pull.result import PullStatus
        out: list[Stored] = []
        consumer = AsyncPullConsumer(self.namesrv, "chaos_audit", timeout=10.0)
        await consumer.start()
        try:
            try:
                queues = await consumer.fetch_subscribe_message_queues(topic)
            except TopicNotFoundError:
                return []
            for mq in queues:
                offset = await consumer.min_offset(mq)
                while True:
                    result = await consumer.pull(mq, "*", offset, 32)
                    for m in result.messages:
                        out.append(Stored(topic, m.queue_id, m.queue_offset, m.msg_id, m.store_timestamp / 1000.0,
                                          m.properties.get("CHAOS", "-")))
                    if result.status is PullStatus.NO_NEW_MSG or result.next_begin_offset <= offset:
                        break
                    offset = result.next_begin_offset
        finally:
            await consumer.close()
        return out

    async def offsets(self, group: str) -> dict[str, tuple[int, int]]:
        """``topic:queue`` -> (committed offset, max offset) for the group's queues, from the broker's consume stats."""
        from rmqrun.client.admin import AdminClient
        from rmqrun.client.instance import ClientInstance
        inst = ClientInstance(self.namesrv, instance_name="chaos-offsets")
        try:
            admin = AdminClient(inst.pool, inst.namesrv, timeout=10.0)
            out = {}
            for addr in (await admin.cluster_info()).all_masters():
                stats = await admin.consume_stats(addr, group)
                for mq, p in stats.offset_table.items():
                    out[f"{mq.topic}:{mq.queue_id}"] = (p.consumer_offset, p.broker_offset)
            return out
        finally:
            await inst.close()

    # ------------------------------------------------------------------ the run

    async def run(self) -> int:
        t0 = time.time()
        await self.broker.start()
        await self.proxy.start()
        await self.create_topic()
        await set_pop_mode(self.namesrv, TOPIC)
        for slots in self.instances.values():
            await self.start_run(slots[0])
        sampler = asyncio.ensure_future(self.sample_memory())
        self.producing = asyncio.ensure_future(self.produce())
        try:
            await self.chaos_phase()
            settled = await self.settle()
            for slots in self.instances.values():
                for run in slots:
                    if run.running:
                        code = await self.stop_run(run)
                        if code != 0:
                            self.notes.append(f"{run.name} exited with {code} on the final SIGTERM")
            await self.check_unexpected_exits()
            return await self.audit(settled, time.time() - t0)
        finally:
            sampler.cancel()
            if not self.producing.done():
                self.stop_producing.set()
                self.producing.cancel()
            for slots in self.instances.values():
                for run in slots:
                    if run.running:
                        run.kill9()
            await self.proxy.stop()
            await self.broker.stop()

    async def audit(self, settled: bool, elapsed: float) -> int:
        stored = await self.read_topic(TOPIC)
        acked = {m for m, _, _ in self.producer.acked}
        rows: dict[str, KindRow] = {k: KindRow() for k in ("none", *FAULT_KINDS, *HANDLER_KINDS)}
        for f in self.faults:
            if f.detail != "the extra instances leave at the end":
                rows[f.kind].injected += 1
        calls_by_group = {g: read_calls(self.work / f"handled-{g}.log") for g, _ in GROUPS}
        handler_fault_rows(calls_by_group, rows)
        audits: list[GroupAudit] = []
        for group, orderly in GROUPS:
            retry = [m for t in retry_topics(group, TOPIC) for m in await self.read_topic(t)]
            dlq = await self.read_topic(f"%DLQ%{group}")
            audits.append(audit_group(group, orderly, calls_by_group[group], stored, retry, dlq, acked,
                                      await self.offsets(group), self.faults, rows, {q: 0 for q in range(QUEUES)}))
        return report(self, audits, rows, stored, calls_by_group, settled, elapsed,
                      kinds=(FAULT_KINDS, HANDLER_KINDS), queues=QUEUES)

    def all_logs(self) -> list[str]:
        return [p.read_text(errors="replace") for p in sorted(self.work.glob("chaos_*.log"))]


def parse_args(argv: list[str] | None = None) -> Options:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--minutes", type=float, default=2.0, help="how long faults are injected (default 2)")
    p.add_argument("--seed", type=int, default=None, help="seed of the fault order and the handler faults "
                                                            "(default: random, printed)")
    p.add_argument("--rate", type=float, default=40.0, help="messages produced per second (default 40)")
    p.add_argument("--keys", type=int, default=16, help="sharding keys (default 16)")
    p.add_argument("--workers", type=int, default=2, help="workers per rmqrun run instance (default 2)")
    p.add_argument("--progress", type=int, default=150,
                   help="messages each group completes after a fault's recovery before the next fault: between "
                        "this and twice this, drawn from the seed (default 150)")
    p.add_argument("--settle-timeout", type=float, default=600.0,
                   help="after the faults, how long to wait for everything to be consumed and committed, counted "
                        "from the last message completed (default 600)")
    p.add_argument("--half-open-limit", type=float, default=60.0,
                   help="seconds a half-open connection is left before the proxy resets it (default 60)")
    p.add_argument("--max-worker-mb", type=int, default=64,
                   help="rmqrun's max_memory_per_worker: one leak passes it (default 64)")
    p.add_argument("--leak-mb", type=int, default=48, help="what a leaking handler call keeps (default 48)")
    p.add_argument("--max-supervisor-mb", type=int, default=400, help="bound of a supervisor's RSS (default 400)")
    p.add_argument("--workdir", type=Path, default=None, help="where data, logs and records go (default: a temp dir)")
    p.add_argument("--keep", action="store_true", help="keep the work directory (kept anyway on failure)")
    p.add_argument("--json", dest="json_out", type=Path, default=None, help="also write the result as JSON here")
    a = p.parse_args(argv)
    for name in ("minutes", "rate"):
        if getattr(a, name) <= 0:
            p.error(f"--{name} must be > 0, got {getattr(a, name)}")
    for name in ("keys", "workers", "progress"):
        if getattr(a, name) < 1:
            p.error(f"--{name} must be >= 1, got {getattr(a, name)}")
    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(1_000_000)
    workdir = a.workdir or Path(tempfile.mkdtemp(prefix="rmqrun-chaos-"))
    workdir.mkdir(parents=True, exist_ok=True)
    return Options(a.minutes, seed, a.rate, a.keys, a.workers, a.progress, a.settle_timeout, a.half_open_limit,
                   workdir, a.keep, a.json_out, a.max_worker_mb, a.leak_mb, a.max_supervisor_mb)


def main(argv: list[str] | None = None) -> int:
    opts = parse_args(argv)
    print(f"chaos: seed {opts.seed}, work directory {opts.workdir}", flush=True)
    from rmqrun.cli import logs
    logs.setup("ERROR", role="chaos")
    async def run() -> int:
        # SIGTERM / SIGINT cancel the run, so its finally blocks stop every process it started
        task = asyncio.current_task()
        assert task is not None
        for sig in (signal.SIGTERM, signal.SIGINT):
            asyncio.get_running_loop().add_signal_handler(sig, task.cancel)
        return await Chaos(opts).run()

    try:
        code = asyncio.run(run())
    except asyncio.CancelledError:
        print(f"chaos: stopped by a signal; work directory kept: {opts.workdir}")
        return 130
    if code == 0 and not opts.keep:
        shutil.rmtree(opts.workdir, ignore_errors=True)
    else:
        print(f"work directory kept: {opts.workdir}")
    return code


if __name__ == "__main__":
    sys.exit(main())
