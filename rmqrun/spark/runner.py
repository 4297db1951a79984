"""``rmqrun spark MODULE:FUNC``: run an ``rmqrun run`` handler over a topic's history on Spark.

The driver, in order (each step fails with one clear line before the next starts):

1. load the handler and ``worker_init`` here (exit 3 when they do not load);
2. check that pyspark and Java are there;
3. plan on the brokers with a :class:`~rmqrun.pull.PullConsumer`: the topic's
   queues, ``--from`` / ``--to`` resolved to one offset per queue
   (:mod:`rmqrun.spark.plan`);
4. start the SparkSession (``--master``, ``local[*]`` by default, given task
   retries when local: :mod:`rmqrun.spark.retries`), ship the
   handler's module to the executors (:mod:`rmqrun.spark.shipping`), and run
   one job: ``parallelize`` of the offset ranges, each partition pulling exactly
   its range and running the handler (:mod:`rmqrun.spark.task`); a thread
   prints progress from two accumulators while the job runs;
5. commit the failures (the executors republished them to ``%RETRY%<group>``,
   or wrote them to parts of ``--failed-to`` that the driver now joins:
   :mod:`rmqrun.spark.failure_parts`), then, with ``--group``, commit every
   queue's end offset to that group, so ``rmqrun run --group G`` continues
   exactly where the backfill stopped; print the summary.

Nothing is committed unless the whole job succeeded and the failures are stored.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, TextIO
from urllib.parse import urlparse

from rmqrun.errors import RmqrunError
from rmqrun.spark.backfill import PULL_GROUP, Bound, RangeReport, TaskConfig
from rmqrun.spark.failure_parts import discard
from rmqrun.spark.failures import is_parquet
from rmqrun.spark.plan import Plan, make_plan
from rmqrun.spark.retries import job_failure_cause, with_task_retries

if TYPE_CHECKING:
    from rmqrun.remoting.security import ClientSecurity

EXIT_OK, EXIT_RUNTIME, EXIT_CONFIG, EXIT_HANDLER = 0, 1, 2, 3


class BackfillError(RmqrunError):
    """The Spark job failed, or its results could not be stored or committed (exit 1)."""


@dataclass
class RunnerOptions:
    handler: str
    namesrv: str
    topic: str
    tags: str = "*"
    start: Bound = field(default_factory=lambda: Bound("earliest"))
    end: Bound = field(default_factory=lambda: Bound("latest"))
    master: str = "local[*]"
    group: str | None = None
    worker_init: str | None = None
    failed_to: str | None = None
    batch_size: int = 1
    time_limit: float = 900.0
    partitions: int | None = None
    conf: dict[str, str] = field(default_factory=dict)
    progress_every: float = 2.0
    app_name: str | None = None
    #: topics and the group live under this namespace on the wire (``ns%topic``); output shows plain names
    namespace: str | None = None
    #: ACL credentials / TLS for the driver's and the executors' connections
    security: "ClientSecurity | None" = field(default=None, repr=False)


@dataclass
class Summary:
    """The totals of a finished run (what the last lines print)."""

    planned: int = 0
    handled: int = 0
    succeeded: int = 0
    failed: int = 0
    sent_to_retry: int = 0
    written: int = 0
    results: dict[str, int] = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)
    partitions: int = 0
    #: the Spark job alone (what the rate is of) and the whole run (session start-up, planning, commit)
    seconds: float = 0.0
    total_seconds: float = 0.0

    def add(self, r: RangeReport) -> None:
        self.handled += r.handled
        self.succeeded += r.succeeded
        self.failed += r.failed
        self.sent_to_retry += r.sent_to_retry
        for k, v in r.results.items():
            self.results[k] = self.results.get(k, 0) + v
        self.reasons.extend(r.sample_reasons[: max(0, 5 - len(self.reasons))])

    def text(self, opts: RunnerOptions) -> str:
        rate = self.handled / self.seconds if self.seconds > 0 else 0.0
        lines = [f"rmqrun spark: {opts.topic} handled {self.handled} messages in {self.partitions} partitions "
                 f"in {self.seconds:.1f} s ({rate:,.0f} msg/s; {self.total_seconds:.1f} s in all): "
                 f"{self.succeeded} succeeded, {self.failed} failed"]
        for name in sorted(self.results):
            lines.append(f"  {name}: {self.results[name]}")
        if self.failed:
            for reason in self.reasons:
                lines.append(f"  e.g. {reason}")
            if opts.failed_to:
                lines.append(f"  {self.written} failed messages written to {opts.failed_to}")
            elif opts.group:
                lines.append(f"  {self.sent_to_retry} failed messages sent to %RETRY%{opts.group}")
        return "\n".join(lines)


def _loopback(master: str) -> bool:
    if master.startswith("local"):
        return True
    host = urlparse(master).hostname or ""
    return host in ("127.0.0.1", "localhost", "::1")


def _check_handler(opts: RunnerOptions) -> None:
    """Import the handler and hook here first: a typo is one line (HandlerLoadError), no Spark started."""
    from rmqrun.handler.loading import load_handler, load_hook

    load_handler(opts.handler, batch_size=opts.batch_size)
    if opts.worker_init:
        load_hook(opts.worker_init, "worker_init")


def _session(opts: RunnerOptions, master: str) -> Any:
    """The data source's :func:`rmqrun.spark.session` (pyspark/Java checks, this interpreter for the Python
    workers, loopback for local masters), bound to loopback for a ``spark://`` master on this machine too."""
    from rmqrun.spark import session

    conf = {"spark.ui.showConsoleProgress": "false"}
    if _loopback(opts.master):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        conf.update({"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"})
    conf.update(opts.conf)
    spark = session(master, opts.app_name or f"rmqrun spark {opts.handler}", **conf)
    spark.sparkContext.setLogLevel("ERROR")
    return spark


class _Progress(threading.Thread):
    """Prints ``done/total`` messages and the rate every few seconds while the job runs.

    Spark sends accumulator updates with each finished task, so progress moves
    a partition at a time; ``--partitions`` sets the granularity.
    """

    def __init__(self, total: int, partitions: int, done: Any, parts: Any, every: float,
                 out: Callable[[str], None]) -> None:
        super().__init__(name="rmqrun-spark-progress", daemon=True)
        self.total, self.partitions, self.done, self.parts = total, partitions, done, parts
        self.every, self.out = every, out
        self.began = time.monotonic()
        self.stopped = threading.Event()

    def line(self) -> str:
        done, parts = int(self.done.value), int(self.parts.value)
        elapsed = time.monotonic() - self.began
        pct = 100.0 * done / self.total if self.total else 100.0
        rate = done / elapsed if elapsed > 0 else 0.0
        return (f"rmqrun spark: progress {done}/{self.total} messages ({pct:.0f}%), {rate:,.0f} msg/s, "
                f"{parts}/{self.partitions} partitions, {elapsed:.0f} s")

    def run(self) -> None:
        while not self.stopped.wait(self.every):
            self.out(self.line())

    def stop(self) -> None:
        self.stopped.set()
        self.join()


def _commit(opts: RunnerOptions, plan: Plan) -> None:
    from rmqrun.pull import PullConsumer

    assert opts.group is not None
    try:
        with PullConsumer(opts.namesrv, opts.group, timeout=10.0, namespace=opts.namespace,
                          security=opts.security) as consumer:
            for mq in plan.queues:
                consumer.update_consume_offset(mq, plan.end[mq])
            consumer.persist_consume_offsets()
    except Exception as exc:
        raise BackfillError(f"the run finished but committing the end offsets to group {opts.group} failed: "
                            f"{type(exc).__name__}: {exc}") from None


def _failures_mode(opts: RunnerOptions) -> str:
    if opts.failed_to:
        return "parts"
    if opts.group:
        return "retry"
    return "count"


def _staging(opts: RunnerOptions) -> str | None:
    """The staging directory of ``--failed-to``'s parts (None without ``--failed-to``)."""
    if not opts.failed_to:
        return None
    from rmqrun.spark.failure_parts import staging_dir
    try:
        return staging_dir(opts.failed_to)
    except OSError as exc:
        raise BackfillError(f"--failed-to {opts.failed_to}: cannot make the directory of its parts: {exc}") from None


def _commit_failures(path: str, staging: str, reports: list[RangeReport], summary: Summary) -> None:
    """Join the parts the successful task attempts reported (one per partition) into ``path``."""
    from rmqrun.spark.failure_parts import commit
    ordered = sorted(reports, key=lambda r: r.partition)
    try:
        commit(path, staging, [r.part for r in ordered if r.part])
    except OSError as exc:
        raise BackfillError(f"--failed-to {path}: cannot write the failed messages: {exc}") from None
    summary.written = sum(r.written for r in ordered)


def run(opts: RunnerOptions, *, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """Run the backfill; returns the exit code. ConfigError (2) and HandlerLoadError (3) are raised."""
    from rmqrun.pull import PullConsumer

    def note(text: str) -> None:
        print(text, file=err, flush=True)

    began = time.monotonic()
    _check_handler(opts)
    from rmqrun.spark import require_java, require_pyspark
    require_pyspark()
    require_java()
    if opts.failed_to:
        from rmqrun.errors import ConfigError
        from rmqrun.spark.failures import check_path
        problem = check_path(opts.failed_to)
        if problem:
            raise ConfigError(problem)

    with PullConsumer(opts.namesrv, opts.group or PULL_GROUP, timeout=10.0, namespace=opts.namespace,
                      security=opts.security) as consumer:
        plan = make_plan(consumer, opts.topic, opts.start, opts.end)
    note(f"rmqrun spark: {opts.topic}: {len(plan.queues)} queues, {plan.total} messages from {opts.start.describe()} "
         f"to {opts.end.describe()}; master {opts.master}")

    staging = _staging(opts)
    try:
        cfg = TaskConfig(namesrv=opts.namesrv, handler=opts.handler, tags=opts.tags, worker_init=opts.worker_init,
                         batch_size=opts.batch_size, time_limit=opts.time_limit, group=opts.group or PULL_GROUP,
                         failures=_failures_mode(opts), failed_parts=staging,
                         failed_parquet=bool(opts.failed_to) and is_parquet(opts.failed_to or ""),
                         namespace=opts.namespace, security=opts.security)
        summary = Summary(planned=plan.total)
        reports: list[RangeReport] = []
        if plan.total:
            reports = _run_job(opts, plan, cfg, summary, note)
        summary.total_seconds = time.monotonic() - began
        for r in reports:
            summary.add(r)
        if opts.failed_to and staging:
            _commit_failures(opts.failed_to, staging, reports, summary)
    finally:
        if staging:
            discard(staging)
    if opts.group:
        _commit(opts, plan)
    print(summary.text(opts), file=out, flush=True)
    if opts.group:
        print(f"rmqrun spark: committed the end offsets of {len(plan.queues)} queues to group {opts.group}",
              file=out, flush=True)
    if summary.failed and not opts.failed_to and not opts.group:
        note(f"rmqrun spark: {summary.failed} messages failed and were not stored anywhere "
             f"(give --failed-to PATH or --group G)")
        return EXIT_RUNTIME
    return EXIT_OK


def _run_job(opts: RunnerOptions, plan: Plan, cfg: TaskConfig, summary: Summary,
             note: Callable[[str], None]) -> list[RangeReport]:
    from rmqrun.spark.shipping import files_to_ship
    from rmqrun.spark.task import partition_function

    master, why = with_task_retries(opts.master, opts.conf)
    if why:
        note(f"rmqrun spark: {why}")
    session = _session(opts, master)
    try:
        sc = session.sparkContext
        with tempfile.TemporaryDirectory(prefix="rmqrun-spark-") as tmp:
            for path in files_to_ship([opts.handler, opts.worker_init], Path(tmp)):
                sc.addPyFile(path)
            ranges = plan.ranges(opts.partitions or max(1, 3 * sc.defaultParallelism))
            summary.partitions = len(ranges)
            done, parts = sc.accumulator(0), sc.accumulator(0)
            progress = _Progress(plan.total, len(ranges), done, parts, opts.progress_every, note)
            progress.start()
            job_began = time.monotonic()
            try:
                rdd = sc.parallelize(ranges, len(ranges))
                reports = rdd.mapPartitionsWithIndex(partition_function(cfg, done, parts)).collect()
            except Exception as exc:
                raise BackfillError(f"the Spark job failed; nothing was committed: {job_failure_cause(exc)}") from None
            finally:
                progress.stop()
            summary.seconds = time.monotonic() - job_began
            note(progress.line())
            return reports
    finally:
        session.stop()
