"""The worker process: read batches from the pipe, run the handler, report statuses.

One worker is one process with one thread of our own: the handler runs in the
main thread, so SIGALRM can interrupt it (the soft time limit) and nothing the
supervisor does waits on it. The loop is deliberately plain:

    boot:  load handler + hooks (exit 3 if that fails), worker_init (exit 4), READY
    loop:  RUN   -> decode, call the handler per message / per chunk, DONE (STARTED again before calls of a
                    long batch; first also for the threads / asyncio classes, whose batches run at once)
           STOP  -> leave the loop
    exit:  worker_exit, exit 0

Recycling limits are checked here (billiard's lesson: the process knows its
own message count and memory): the message count after each batch, the RSS
after every handler call (one ``pread`` of ``/proc/self/statm``). When one is
reached the worker sends RETIRING and keeps working until the supervisor,
having started a replacement, sends STOP behind the last batch it gave us;
over the memory limit it runs no further handler call (the rest of the batch,
and any batch still queued for it, come back NOT_RUN and go to the
replacement), so RSS overshoots the limit by at most one call.

Progress within a batch goes to memory shared with the supervisor
(:mod:`rmqrun.pipe.progress`), so that if this process dies, messages
that already have a result are not run again and the supervisor knows which
message was in the handler.

Signals: SIGINT and SIGHUP are ignored (a terminal sends them to the whole
process group; the supervisor decides what workers do). SIGTERM means "stop
now": a running handler call is interrupted with :class:`WorkerTerminated`,
its messages and the rest of the batch come back as NOT_RUN, worker_exit runs.
SIGALRM is used for the soft time limit (one timer per handler call), so handlers must not use it.
"""

from __future__ import annotations

import math
import os
import random
import signal
import socket
import struct
import sys
import time
from typing import Any, Callable

from loguru import logger

from rmqrun.namespace import unwrap
from rmqrun.remoting.message import QUEUE_OFFSET_POS
from rmqrun.pipe import progress as progress_mem
from rmqrun.pipe.wire import (
    Boot, BootFailed, ConsumeMode, Done, ExitCode, FrameBuffer, Frame, Ready, Retiring, Run, Started, Status, Stop,
    WireError,
)
from rmqrun.pipe.worker_config import WorkerConfig
from rmqrun.worker import guard
from rmqrun.worker import logs as worker_logs
from rmqrun.worker import memory_watch
from rmqrun.handler.loading import Handler, HandlerLoadError, WorkerInfo, call_hook, load_handler, load_hook
from rmqrun.handler.outcome import BadResultError, map_concurrent
from rmqrun.handler.results import SoftTimeLimitExceeded, WorkerTerminated
from rmqrun.worker.batch_outcome import BatchOutcome
from rmqrun.worker.clean_batches import CleanBatches
from rmqrun.worker.handler import map_orderly
from rmqrun.worker.call_runners import CallRunner
from rmqrun.worker.lanes import LaneServer
from rmqrun.worker.pipe_end import PipeEnd
from rmqrun.worker.batch_decode import chunks_around as _chunks_around, decode_batch
from rmqrun.worker.time_limit import CallLimit

_SIZE = struct.Struct(">i")
_OFFSET = struct.Struct(">q")


class _Unplaced:
    """Stands for the writer in the call loop when results are not written in place: its ``mm`` is None."""

    mm = None


_UNPLACED = _Unplaced()


class Worker:
    """One worker process's state; :meth:`run` returns the exit code."""

    def __init__(self, config: WorkerConfig, worker_id: int, sock: socket.socket,
                 progress: progress_mem.Writer | None = None) -> None:
        self.config = config
        self.progress = progress
        self._over_memory = ""

        self.worker_id = worker_id
        self.pid = os.getpid()
        self.pipe = PipeEnd(sock)
        self.log = logger.bind(worker_id=worker_id, pid=self.pid)
        self.handler: Handler | None = None
        self.exit_hook: Any = None
        self.handled = 0
        self.message_limit = (config.max_messages + random.randint(0, max(0, config.max_messages_jitter))
                              if config.max_messages > 0 else 0)
        self._retiring = False
        self._terminating = False
        self._in_batch = False
        self._call_started = 0.0
        self.call_limit = CallLimit(config.time_limit, config.kill_grace)
        self._idle = False
        self._warned: set[Any] = set()
        #: resident set size in bytes, read per call under max_memory (set at boot); 0 without a limit
        self.rss: Callable[[], int] = lambda: 0
        #: with no memory limit, a warning when RSS keeps growing (a leak nothing recycles)
        self._growth = memory_watch.GrowthWatch() if config.max_memory <= 0 else None
        self._clean = CleanBatches()  # the orderly batches a chained batch (Run.after) may follow
        #: why this worker runs no further handler call (a thread stuck past its limit), recycling
        self._no_more_calls = ""
        #: the threads / asyncio worker classes: calls at once (:mod:`.call_runners`); None for process
        self.runner: CallRunner | None = None

    # ------------------------------------------------------------------ signals
    def _on_alarm(self, signum: int, frame: Any) -> None:
        """The soft limit of the running call, armed at its start for its own deadline (:mod:`.time_limit`)."""
        self.call_limit.on_alarm()

    def _on_term(self, signum: int, frame: Any) -> None:
        self._terminating = True
        if self._in_batch or self._idle:
            raise WorkerTerminated()

    def _install_signals(self) -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, self._on_term)
        signal.signal(signal.SIGALRM, self._on_alarm)

    # ------------------------------------------------------------------ lifecycle
    def run(self) -> int:
        self._install_signals()
        try:
            return self._run()
        except (BrokenPipeError, ConnectionResetError):
            return ExitCode.LOST_SUPERVISOR

    def _run(self) -> int:
        cfg = self.config
        info = WorkerInfo(self.worker_id, self.pid)
        try:
            aio = cfg.worker_class == "asyncio"
            self.handler = load_handler(cfg.handler, batch_size=cfg.batch_size, asyncio=aio)
            init_hook = load_hook(cfg.worker_init, "worker_init", asyncio=aio) if cfg.worker_init else None
            self.exit_hook = load_hook(cfg.worker_exit, "worker_exit", asyncio=aio) if cfg.worker_exit else None
        except HandlerLoadError as exc:
            self.log.debug("cannot load: {}", exc)  # the supervisor logs it once, not once per worker
            return self._boot_failed(ExitCode.BOOT_ERROR, str(exc))
        if cfg.worker_class != "process":
            self.runner = CallRunner(self, cfg.worker_class, cfg.concurrency)
        if init_hook is not None:
            try:
                self._hook(init_hook, info)
            except Exception as exc:
                self.log.opt(exception=exc).error("worker_init '{}' raised", cfg.worker_init)
                return self._boot_failed(ExitCode.INIT_ERROR,
                                         f"worker_init '{cfg.worker_init}' raised {type(exc).__name__}: {exc}")
        if cfg.otel:
            try:
                from rmqrun.worker import otel
            except ImportError as exc:
                return self._boot_failed(ExitCode.BOOT_ERROR, f"otel is on but OpenTelemetry is not installed "
                                         f"({exc}): pip install 'rmqrun[otel]'")
            otel.configure_sdk()  # after worker_init: a tracer provider it installed is kept
            self.handler = otel.traced_handler(self.handler, cfg.consumer_group)
        if cfg.max_memory > 0:
            self.rss = memory_watch.read_rss() or _psutil_rss()  # not Linux: a slower psutil read, still per call
        self.pipe.send(Ready(self.pid))
        self.pipe.flush()
        self.log.debug("ready: handler {}", self.handler.ref)
        try:
            code = self._loop()
        finally:
            self._call_exit_hook(info)
            if cfg.otel:
                from rmqrun.worker import otel
                otel.shutdown()  # the spans still buffered are exported before the process ends
        return code

    def _boot_failed(self, code: ExitCode, message: str) -> int:
        try:
            self.pipe.send(BootFailed(int(code), message))
            self.pipe.flush()
        except OSError:
            pass
        return code

    def _call_exit_hook(self, info: WorkerInfo) -> None:
        if self.exit_hook is None:
            return
        try:
            self._hook(self.exit_hook, info)
        except Exception as exc:
            self.log.opt(exception=exc).error("worker_exit '{}' raised", self.config.worker_exit)

    def _hook(self, fn: Any, info: WorkerInfo) -> None:
        (call_hook if self.runner is None else self.runner.call_hook)(fn, info)

    def stop_calls(self, reason: str) -> None:
        """No further handler call here (a thread stuck past its limit): recycle, as over the memory limit."""
        if not self._no_more_calls:
            self._no_more_calls = reason

    def _next_frame(self) -> Frame | None:
        """The next frame; flushes our output before blocking. None at end of file."""
        pipe = self.pipe
        while not pipe.has_frame():
            pipe.flush()
            self._idle = True
            try:
                if self._terminating:
                    return None
                pipe.wait_readable()
                data = pipe.read()
            finally:
                self._idle = False
            if not data:
                return None
            pipe.frames.feed(data)
        return pipe.frames.next()

    def _loop(self) -> int:
        if self.runner is not None:  # threads / asyncio: batches at once, frames read as they run (lanes.py)
            return self.runner.loop.run_until_complete(LaneServer(self.runner).serve())
        while not self._terminating:
            try:
                frame = self._next_frame()
            except WorkerTerminated:
                break
            except WireError as exc:
                self.log.error("bad frame from the supervisor: {}", exc)
                return ExitCode.LOST_SUPERVISOR
            if frame is None:
                if self._terminating:
                    break
                self.log.warning("the supervisor closed the pipe; exiting")
                return ExitCode.LOST_SUPERVISOR
            if isinstance(frame, Run):
                self._run_batch(frame)
                self._check_recycle()
            elif isinstance(frame, Stop):
                break
            else:
                self.log.error("unexpected frame from the supervisor: {}", type(frame).__name__)
                return ExitCode.LOST_SUPERVISOR
        self.pipe.flush()
        return ExitCode.OK

    # ------------------------------------------------------------------ batches
    def _decode(self, run: Run) -> tuple[list[Any], list[int], list[str | None]]:
        """Messages (None where a record does not decode), queue offsets, decode errors."""
        data, pos = run.records_in_bytes()
        return decode_batch(data, pos, run.broker_name, self.config.namespace)

    def _memory_check(self) -> bool:
        """True (and the reason kept) when RSS is over max_memory: no further handler call here."""
        if self._over_memory:
            return True
        limit = self.config.max_memory
        if limit <= 0:
            return False
        rss = self.rss()
        if rss > limit:
            self._over_memory = f"RSS {rss >> 20} MiB over the limit of {limit >> 20} MiB"
            return True
        return False

    def _skip_batch(self, run: Run, why: str) -> None:
        """Answer a batch without running it: every message NOT_RUN (redelivered, no retry counted)."""
        offsets = []
        data, pos = run.records, 0
        while pos < len(data):
            offsets.append(_OFFSET.unpack_from(data, pos + QUEUE_OFFSET_POS)[0])
            pos += _SIZE.unpack_from(data, pos)[0]
        n = len(offsets)
        self.pipe.send(Done(run.batch_id, bytes([Status.NOT_RUN]) * n, (0,) * n, tuple(offsets), -1, False,
                            why, 0))

    def _run_batch(self, run: Run) -> None:
        """One RUN: skip it, or announce it, decode, call the handler within the limits, report DONE."""
        assert self.handler is not None
        prog = self.progress
        if not self._may_run(run, prog):
            return
        t0 = time.perf_counter()
        msgs, offsets, decode_errors = self._decode(run)
        context = worker_logs.CONTEXT
        # by reference: what the handler logs is labelled only when it logs
        context.begin(msgs, offsets, unwrap(self.config.namespace, run.topic))
        outcome = BatchOutcome(len(msgs))
        if prog is not None:  # results written where the supervisor reads them (progress.Writer.in_place)
            outcome.statuses = prog.in_place(len(msgs)) or outcome.statuses
        self._call_within_limits(run, msgs, offsets, decode_errors, outcome)
        context.end()
        self._answer(run, prog, outcome, offsets, t0)

    def _may_run(self, run: Run, prog: progress_mem.Writer | None) -> bool:
        """Whether the batch runs (announced, its lane begun); if not, it is answered NOT_RUN here."""
        if prog is not None and prog.skipped(run.batch_id):  # it claims the batch: supervisor/liveness.py
            self._skip_batch(run, "skipped: its queue was dropped")
            return False
        if self._over_memory or self._no_more_calls:
            self._skip_batch(run, "")
            return False
        if run.after and not self._clean.may_follow(run.after):
            self._skip_batch(run, "")  # the batch ahead of it did not succeed here: nothing after a failure runs
            return False
        if self.runner is not None:  # batches at once: the supervisor learns which began from STARTED
            self.pipe.send(Started(run.batch_id))
        # a process worker runs its batches in order: the previous one's DONE (out before this batch begins)
        # is its start, as far as the supervisor is concerned (WorkerProcess.due); no STARTED of its own
        self.pipe.flush()
        if prog is not None:
            prog.begin(run.batch_id)
        return True

    def _answer(self, run: Run, prog: progress_mem.Writer | None, outcome: BatchOutcome, offsets: list[int],
                t0: float) -> None:
        """The batch ran: its results to the progress block (all final), then DONE."""
        n = len(offsets)
        if prog is not None:
            prog.publish(outcome.statuses, outcome.delays, n)
        self.handled += n
        statuses = bytes(outcome.statuses)
        if run.mode is ConsumeMode.ORDERLY and statuses.count(0) == n:
            self._clean.add(run.batch_id)
        self.pipe.send(Done(run.batch_id, statuses, tuple(outcome.delays), tuple(offsets),
                            outcome.suspend_ms, outcome.timed_out, outcome.error,
                            int((time.perf_counter() - t0) * 1e6), tuple(outcome.errors.items())))

    def _call_within_limits(self, run: Run, msgs: list[Any], offsets: list[int], decode_errors: list[str | None],
                            outcome: BatchOutcome) -> None:
        """The batch's handler calls under the soft time limit, the memory limit and SIGTERM.

        Each call arms the timer for its own deadline. A limit that fires just as a
        call returns, or SIGTERM between calls, outside the loop's own ``try``, lands
        here: the messages not yet called stay NOT_RUN. A limit that fired is logged
        wherever it fired, also when the handler caught it and went on.
        """
        self._call_started = time.monotonic()
        try:
            self._in_batch = True
            try:
                self._call_handler(run, msgs, offsets, decode_errors, outcome)
                if self.config.max_memory > 0 and msgs:
                    self._memory_check()
            finally:
                self._in_batch = False
                self.call_limit.disarm()
        except SoftTimeLimitExceeded as exc:  # fired as a call returned: the rest stays NOT_RUN
            outcome.timed_out = True
            outcome.error = outcome.error or f"handler '{self.handler.ref}': {exc}"  # type: ignore[union-attr]
        except WorkerTerminated:  # SIGTERM: the interrupted call and the rest stay NOT_RUN
            self._terminating = True
            outcome.error = outcome.error or "worker terminated (SIGTERM)"
        except progress_mem.CallCut:  # the rest was given to another worker while a call here ran long
            pass
        self._in_batch = False
        fired = self.call_limit.take_fired()
        if fired >= 0:
            self.log.warning("handler '{}': soft time limit ({:g} s) exceeded (queue offset {})",
                             self.handler.ref, self.config.time_limit, fired)  # type: ignore[union-attr]

    def _call_handler(self, run: Run, msgs: list[Any], offsets: list[int], decode_errors: list[str | None],
                      outcome: BatchOutcome) -> None:
        """The hot loop: the handler per message (or chunk); None costs one status byte, others :meth:`_map_result`."""
        assert self.handler is not None
        prog, statuses = self.progress, outcome.statuses
        # results in the block itself (Writer.in_place): a call is one pack; a forked copy back here leaves (guard.py)
        mm = prog.mm if prog is not None and prog.placed else None
        owner = prog if mm is not None else _UNPLACED
        pack_state, state_at, cut_at = progress_mem.STATE.pack_into, progress_mem.STATE_AT, progress_mem.CUT_FLAG_AT
        context = worker_logs.CONTEXT
        n = len(msgs)
        check_memory, orderly = self.config.max_memory > 0, run.mode is ConsumeMode.ORDERLY
        fail = Status.SUSPEND if orderly else Status.RECONSUME_LATER
        fn, ref, is_batch = self.handler.fn, self.handler.ref, self.handler.is_batch
        step = self.config.batch_size if is_batch else 1
        limit = self.config.time_limit
        # STARTED again once the last one is this old: the hard limit (time_limit + kill_grace) follows the call
        announce_every = min(self.config.kill_grace, limit) / 2 if limit > 0 else 0.0
        monotonic, announced, call_limit = time.monotonic, self._call_started, self.call_limit
        growth = self._growth  # with no memory limit: RSS read between calls, at most once a second
        growth_at = growth.next_at if growth is not None else math.inf
        any_bad = any(decode_errors)
        chunks = (_chunks_around(decode_errors, step) if any_bad  # (start, end) per call; the usual ones built in C
                  else zip(range(0, n, step), (*range(step, n, step), n)) if n else ())
        for start, end in chunks:
            if any_bad and decode_errors[start]:  # never handed to the handler: dead-lettered as stored
                outcome.fail(start, start + 1, Status.UNDECODABLE, str(decode_errors[start]))
                if orderly:
                    break  # the queue's order: nothing after it runs before it is dead-lettered
                continue
            if check_memory and start and self._memory_check():
                break  # recycle after the call that went over: the rest go to the replacement
            arg = msgs[start:end] if is_batch else msgs[start]
            context.index = start
            # one clock read per call: "call began" (the consume-timeout sweep's) and the time limit's
            now = monotonic()
            if now >= growth_at and start:  # after this batch's previous call (the batch's end: _check_recycle)
                growth_at = growth.sample(self.handled + start)  # type: ignore[union-attr]
            if mm is not None:  # every message before start has its status in the block: done = start
                pack_state(mm, state_at, now, start, start, end, 1)
                if mm[cut_at]:  # the cut flag: one byte read per call
                    prog.check_cut(start)  # type: ignore[union-attr]
            elif prog is not None:
                prog.call(statuses, outcome.delays, start, end, now)
            if limit > 0:
                # this call's deadline; an earlier call's timer is kept if it fires no earlier (arm's own test)
                call_limit.offset = offsets[start]
                call_limit.deadline = deadline = now + limit
                if deadline > call_limit.expires:
                    call_limit.arm(now, offsets[start])  # this call's own timer: no earlier alarm reaches it
                if now - announced > announce_every:
                    announced = now
                    self.pipe.send(Started(run.batch_id))
                    self.pipe.flush()
            try:
                value = fn(arg)
                call_limit.deadline = 0.0  # returned: an alarm from here on came too late for it
                if owner.mm is not mm:  # a forked copy, back before it writes the block: it leaves (guard.py)
                    owner.call(statuses, outcome.delays, start, end, now)  # type: ignore[union-attr]
                if value is None:  # the common case, in both modes: SUCCESS (0) for the chunk
                    if step == 1:
                        statuses[start] = 0
                    else:
                        statuses[start:end] = bytes(end - start)
                    continue
            except SoftTimeLimitExceeded as exc:  # (one-shot timer; the warning: once the batch is over)
                outcome.fail(start, end, fail, f"handler '{ref}': {exc}")
                outcome.timed_out = True
                break
            except (Exception, KeyboardInterrupt) as exc:  # SIGINT is ignored here: the handler raised it
                if owner.mm is not mm:  # a forked copy: it leaves (guard.py)
                    owner.call(statuses, outcome.delays, start, end, now)  # type: ignore[union-attr]
                call_limit.deadline = 0.0
                outcome.fail(start, end, fail, f"handler '{ref}' raised {type(exc).__name__}: {exc}")
                self._log_exception(exc, offsets[start])
                if orderly:
                    break
                continue
            if self._map_result(value, run, start, end, outcome, offsets):
                break

    def _map_result(self, value: Any, run: Run, start: int, end: int, outcome: BatchOutcome, offsets: Any) -> bool:
        """Statuses of messages [start, end) from what a call returned; True when the batch stops here.

        An orderly batch stops at a SUSPEND or ROLLBACK (the queue's order) and at a bad result; a
        concurrent batch goes on. A bad result is logged for every call it fails, with the queue offsets.
        """
        ref = self.handler.ref  # type: ignore[union-attr]
        statuses = outcome.statuses
        orderly = run.mode is ConsumeMode.ORDERLY
        fail = Status.SUSPEND if orderly else Status.RECONSUME_LATER
        if value is False:  # "not done": failed as ReconsumeLater() / SuspendCurrentQueue(), with a reason
            outcome.error = outcome.error or f"handler '{ref}' returned False"
        try:
            if orderly:
                out = map_orderly(value, ref, auto_commit=run.auto_commit)
                if out.warning:
                    self._warn_once(("illegal", type(value)), out.warning)
                statuses[start:end] = bytes([out.status]) * (end - start)
                if out.status is Status.SUSPEND or out.status is Status.ROLLBACK:
                    outcome.suspend_ms = out.suspend_ms
                    return True
            else:
                c = map_concurrent(value, end - start, ref)
                acked = start + c.acked
                statuses[start:acked] = bytes([Status.SUCCESS]) * c.acked
                if acked < end:
                    statuses[acked:end] = bytes([fail]) * (end - acked)
                    outcome.delays[acked:end] = [c.delay_level] * (end - acked)
                    if self.progress is not None:  # before done passes them (progress.Writer.in_place)
                        self.progress.set_delays(acked, end, c.delay_level)
        except BadResultError as exc:
            statuses[start:end] = bytes([fail]) * (end - start)
            outcome.failed(start, end, str(exc))
            self.log.error("{}: failed, to be retried ({})", exc, f"queue offset {offsets[start]}" if end - start == 1
                           else f"{end - start} messages, queue offsets {offsets[start]}..{offsets[end - 1]}")
            return orderly
        return False

    def _log_exception(self, exc: BaseException, offset: int) -> None:
        key = ("exc", type(exc))
        ref = self.handler.ref if self.handler else "?"
        if key in self._warned:
            self.log.warning("handler '{}' raised {}: {} (queue offset {})", ref, type(exc).__name__, exc, offset)
        else:
            self._warned.add(key)
            self.log.opt(exception=exc).warning("handler '{}' raised {} (queue offset {})",
                                                ref, type(exc).__name__, offset)

    def _warn_once(self, key: Any, text: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            self.log.error("{} (logged once per worker)", text)

    def _check_recycle(self) -> None:
        if self._growth is not None:
            self._growth.sample(self.handled)
        if self._retiring:
            return
        reason = ""
        if self.message_limit and self.handled >= self.message_limit:
            reason = f"handled {self.handled} messages (limit {self.message_limit})"
        elif self._over_memory or self._no_more_calls:
            reason = self._over_memory or self._no_more_calls
        if reason:
            self._retiring = True
            self.log.info("recycling: {}", reason)
            self.pipe.send(Retiring(reason))


def _psutil_rss() -> Callable[[], int]:
    import psutil
    proc = psutil.Process()
    return lambda: int(proc.memory_info().rss)


def _read_boot(sock: socket.socket) -> tuple[Boot, FrameBuffer]:
    """The BOOT frame, and the buffer holding whatever arrived after it (batches may already be queued)."""
    frames = FrameBuffer()
    while not frames.has_frame():
        data = sock.recv(1 << 16)
        if not data:
            raise WireError("the supervisor closed the pipe before sending BOOT")
        frames.feed(data)
    frame = frames.next()
    if not isinstance(frame, Boot):
        raise WireError(f"expected a BOOT frame first, got {type(frame).__name__}")
    return frame, frames


def main(argv: list[str] | None = None) -> None:
    """Entry point of a worker process: ``python -m rmqrun.worker <socket fd> <progress fd> <supervisor pid>``.

    Reads the BOOT frame (worker id, settings, the supervisor's sys.path),
    then runs the worker and exits with an :class:`ExitCode`.
    """
    argv = sys.argv[1:] if argv is None else argv
    sock = socket.socket(fileno=int(argv[0]))
    progress = progress_mem.Writer(progress_mem.map_fd(int(argv[1]))) if len(argv) > 1 else None
    sock.setblocking(True)
    try:
        boot, frames = _read_boot(sock)
        config = WorkerConfig(**boot.settings)
    except (WireError, TypeError, OSError) as exc:
        print(f"rmqrun worker: bad start-up data: {exc}", file=sys.stderr)
        raise SystemExit(ExitCode.LOST_SUPERVISOR) from None
    sys.path[:] = boot.sys_path
    worker_logs.setup(boot.worker_id, os.getpid(), config.log_level, config.log_format, config.max_log_record)
    guard.protect(boot.worker_id, config.handler, int(argv[2]) if len(argv) > 2 else 0, sock, progress)
    worker = Worker(config, boot.worker_id, sock, progress)
    worker.pipe.frames = frames
    code = worker.run()
    worker_logs.flush()
    sys.__stderr__.flush()
    if worker.runner is not None:
        stuck = worker.runner.stuck
        worker.runner.close()
        if stuck:  # a thread still in a call would keep the interpreter from exiting
            os._exit(int(code))
    raise SystemExit(int(code))
