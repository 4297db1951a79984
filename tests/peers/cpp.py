"""Test-side handle on the Apache RocketMQ C++ client peer.

The client itself runs in a child process (``cpp_peer.py``, started with this
interpreter) so that a native crash or hang costs one test, not the session.
Every wait here has a timeout that kills the child, and every failure message
carries what the child printed, its stderr and the tail of the C++ client's
own log, because "the peer failed" alone is useless when debugging a broker.

Each child gets its own ``$HOME`` (a temp dir, or ``home=`` from the caller,
e.g. pytest's ``tmp_path``): the C++ client writes its log under
``$HOME/logs/rocketmq-cpp`` and cannot be told otherwise. A temp dir we made is
removed once the child ended well and kept (its path is in the error) otherwise.

Typical use::

    if not cpp_available():
        pytest.skip(cpp_unavailable_reason())
    sent = run_producer(namesrv, topic="T", count=10, tags=["TagA", "TagB"])
    with start_consumer(namesrv, topic="T", group="CG", expect=10) as consumer:
        consumer.wait_ok(10, timeout=30)
"""

from __future__ import annotations

import atexit
import collections
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from .cpp_peer_runtime import (  # noqa: F401 - re-exported for tests
    EXIT_CLIENT_ERROR, EXIT_HUNG, EXIT_OK, EXIT_SEND_FAILED, EXIT_TIMEOUT, EXIT_USAGE,
)

PEER_SCRIPT = Path(__file__).with_name("cpp_peer.py")

# The peer's own watchdog ends a blocked start()/shutdown() after 20 s each
# (cpp_peer.py defaults); these outer limits sit above that so the peer's clear
# "deadline" line normally wins over a blind kill from here.
START_DEADLINE_S = 20.0
SHUTDOWN_DEADLINE_S = 20.0
# The C++ producer's sync send gives each attempt the whole send timeout and, when one times out, sends
# the message again to the next queue (3 attempts, no total budget; DefaultMQProducer::sendDefaultImpl).
# The first copy is usually stored already: a broker that answers later than the timeout ends with the
# message stored twice and SEND_OK reported. The client's own 3 s default let a CI box that stalled the
# stub broker's thread for 3 s duplicate a message; tests want exactly what they sent, so the harness
# waits far longer. A test about timeouts passes its own.
SEND_TIMEOUT_MS = 15_000
SEND_ATTEMPTS = 3
SEND_DEADLINE_S = SEND_ATTEMPTS * SEND_TIMEOUT_MS / 1000 + 5.0  # the peer's watchdog: after every attempt
STOP_GRACE_S = SHUTDOWN_DEADLINE_S + 5.0
PROBE_TIMEOUT_S = 30.0

_STDERR_TAIL = 60
_LOG_TAIL = 40


class CppPeerError(RuntimeError):
    """The peer failed, timed out or exited unexpectedly; the text says everything we know."""

    def __init__(self, message: str, returncode: int | None = None, lines: Sequence[dict[str, Any]] = ()):
        super().__init__(message)
        self.returncode = returncode
        self.lines = list(lines)


# ------------------------------------------------------------- availability

@functools.lru_cache(maxsize=1)
def _probe() -> tuple[bool, str]:
    home = tempfile.mkdtemp(prefix="cpp-peer-probe-")
    try:
        proc = subprocess.run([sys.executable, "-u", str(PEER_SCRIPT), "probe", "--home", home],
                              capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, env=_child_env(home))
    except subprocess.TimeoutExpired:
        return False, f"the C++ client probe hung for {PROBE_TIMEOUT_S:g}s"
    finally:
        shutil.rmtree(home, ignore_errors=True)
    lines = _parse_lines(proc.stdout.splitlines())
    probe = next((line for line in lines if line.get("event") == "probe"), None)
    if proc.returncode == EXIT_OK and probe and probe.get("ok"):
        return True, f"librocketmq loaded from {probe.get('library')}"
    error = next((line for line in lines if line.get("event") == "error"), {})
    detail = error.get("message") or (probe and f"missing symbols {probe.get('missing_symbols')}") \
        or proc.stderr.strip()[-500:]
    return False, f"the Apache C++ client (PyPI rocketmq==0.4.4) cannot load (exit {proc.returncode}): {detail}"


def cpp_available() -> bool:
    """True when `import rocketmq` works and librocketmq.so runs, checked once in a child."""
    return _probe()[0]


def cpp_unavailable_reason() -> str:
    """Why `cpp_available()` is False (a skip reason); a description of the library otherwise."""
    return _probe()[1]


# --------------------------------------------------------------- producing

def run_producer(namesrv: str, *, topic: str, count: int, group: str = "PG_cpp_peer",
                 tags: Sequence[str] = (), keys_prefix: str | None = None, props: Mapping[str, str] | None = None,
                 orderly: bool = False, sharding_key_mod: int = 1, oneway: bool = False, batch: int = 0,
                 body_size: int | None = None, delay_level: int = 0, instance_name: str | None = None,
                 send_timeout_ms: int = SEND_TIMEOUT_MS, send_deadline: float = SEND_DEADLINE_S, keep_going: bool = False,
                 log_level: str = "info", home: str | os.PathLike[str] | None = None,
                 timeout: float | None = None, check: bool = True,
                 credentials: tuple[str, str] | None = None) -> list[dict[str, Any]]:
    """Send `count` messages with the C++ producer; returns one dict per message.

    Each dict is the peer's ``sent`` line (index, status, msg_id, offset, and
    queue/queue_count for orderly sends) or its ``send_failed`` line. With
    `check`, anything but a clean run of SEND_OK results raises CppPeerError.
    Message i carries property ``idx=i``; with `orderly` also ``shard=i % M``.
    """
    argv = ["produce", "--namesrv", namesrv, "--group", group, "--topic", topic, "--count", str(count),
            "--log-level", log_level, "--send-timeout-ms", str(send_timeout_ms),
            "--send-deadline", str(send_deadline)]
    argv += _opt("--tags", ",".join(tags) if tags else None) + _opt("--keys-prefix", keys_prefix)
    for key, value in (props or {}).items():
        argv += ["--prop", f"{key}={value}"]
    argv += ["--orderly", "--sharding-key-mod", str(sharding_key_mod)] if orderly else []
    argv += ["--oneway"] if oneway else []
    argv += _opt("--batch", batch or None) + _opt("--body-size", body_size)
    argv += _opt("--delay-level", delay_level or None) + _opt("--instance-name", instance_name)
    argv += ["--keep-going"] if keep_going else []
    argv += _credential_args(credentials)
    if timeout is None:  # worst cases: start, one blocked send, shutdown; plus the normal sends
        timeout = START_DEADLINE_S + send_deadline + SHUTDOWN_DEADLINE_S + 0.05 * count + 5.0

    workdir = _Home(home)
    command = [sys.executable, "-u", str(PEER_SCRIPT), *argv, "--home", workdir.path]
    began = time.monotonic()
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=_child_env(workdir.path))
    except subprocess.TimeoutExpired as exc:  # subprocess.run has killed the child
        lines = _parse_lines(_as_text(exc.stdout).splitlines())
        raise CppPeerError(_report(f"C++ producer killed after {timeout:g}s", None, lines,
                                   _as_text(exc.stderr).splitlines(), workdir), None, lines) from None
    lines = _parse_lines(proc.stdout.splitlines())
    results = [line for line in lines if line.get("event") in ("sent", "send_failed")]
    if check and proc.returncode != EXIT_OK:
        raise CppPeerError(_report(f"C++ producer failed after {time.monotonic() - began:.1f}s", proc.returncode,
                                   lines, proc.stderr.splitlines(), workdir), proc.returncode, lines)
    workdir.release(ok=True)  # success, or a failure the caller asked to inspect itself
    return results


def _credential_args(credentials: tuple[str, str] | None) -> list[str]:
    """``(access_key, secret_key)``: the peer signs every request (ACL 1.0) via set_session_credentials."""
    if credentials is None:
        return []
    return ["--access-key", credentials[0], "--secret-key", credentials[1]]


# --------------------------------------------------------------- consuming

def start_consumer(namesrv: str, *, topic: str, group: str = "CG_cpp_peer", tags: str = "*",
                   orderly: bool = False, broadcasting: bool = False, fail_first: Iterable[int | str] = (),
                   fail_always: Iterable[int | str] = (), expect: int | None = None, timeout: float = 60.0,
                   linger: float = 0.0, threads: int | None = None, batch_max: int | None = None,
                   work_ms: float = 0.0, instance_name: str | None = None, read_props: Iterable[str] = (),
                   log_level: str = "info", home: str | os.PathLike[str] | None = None,
                   credentials: tuple[str, str] | None = None) -> "CppConsumer":
    """Start a C++ push consumer in a child process and return a handle on it.

    The child exits by itself after `expect` distinct successful messages
    (exit 0) or `timeout` seconds (exit 3 with `expect`, 0 without).
    `fail_first` idx values get RECONSUME_LATER on their first delivery.
    """
    argv = ["consume", "--namesrv", namesrv, "--group", group, "--topic", topic, "--tags", tags,
            "--timeout", str(timeout), "--linger", str(linger), "--log-level", log_level]
    argv += ["--orderly"] if orderly else []
    argv += ["--broadcasting"] if broadcasting else []
    argv += _opt("--fail-first", ",".join(map(str, fail_first)) or None)
    argv += _opt("--fail-always", ",".join(map(str, fail_always)) or None)
    argv += _opt("--expect", expect) + _opt("--threads", threads) + _opt("--batch-max", batch_max)
    argv += _opt("--work-ms", work_ms or None) + _opt("--instance-name", instance_name)
    for name in read_props:
        argv += ["--read-prop", name]
    argv += _credential_args(credentials)
    return CppConsumer(argv, _Home(home), run_for=timeout + linger)


class CppConsumer:
    """A running C++ push consumer: its JSON lines as they arrive, and ways to end it."""

    def __init__(self, argv: list[str], home: "_Home", run_for: float):
        self._home = home
        self._run_for = run_for
        self._cond = threading.Condition()
        self._lines: list[dict[str, Any]] = []
        self._stderr: collections.deque[str] = collections.deque(maxlen=_STDERR_TAIL)
        self._eof = False
        self._proc = subprocess.Popen([sys.executable, "-u", str(PEER_SCRIPT), *argv, "--home", home.path],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                      env=_child_env(home.path))
        self._readers = [threading.Thread(target=self._read_stdout, daemon=True),
                         threading.Thread(target=self._read_stderr, daemon=True)]
        for reader in self._readers:
            reader.start()
        _LIVE.add(self)

    @property
    def pid(self) -> int:
        return self._proc.pid

    @property
    def returncode(self) -> int | None:
        return self._proc.poll()

    @property
    def home(self) -> str:
        return self._home.path

    def lines(self) -> list[dict[str, Any]]:
        """Every JSON line printed so far (a copy)."""
        with self._cond:
            return list(self._lines)

    def messages(self) -> list[dict[str, Any]]:
        """The ``message`` lines: one per delivery, with the verdict the peer returned."""
        return [line for line in self.lines() if line.get("event") == "message"]

    def wait_for(self, predicate: Callable[[list[dict[str, Any]]], bool], timeout: float,
                 what: str = "condition") -> list[dict[str, Any]]:
        """Block until `predicate(lines)` holds; CppPeerError on timeout or if the child ends first."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                if predicate(self._lines):
                    return list(self._lines)
                finished = self._eof and self._proc.poll() is not None
                remaining = deadline - time.monotonic()
                if finished or remaining <= 0:
                    break
                self._cond.wait(min(remaining, 0.5))
        reason = "exited" if finished else f"still waiting after {timeout:g}s"
        raise CppPeerError(self.report(f"C++ consumer {reason} before {what}"), self._proc.poll(), self.lines())

    def wait_started(self, timeout: float = START_DEADLINE_S + 5.0) -> dict[str, Any]:
        lines = self.wait_for(lambda ls: any(line.get("event") == "started" for line in ls), timeout, "'started'")
        return next(line for line in lines if line.get("event") == "started")

    def wait_ok(self, count: int, timeout: float) -> list[dict[str, Any]]:
        """Wait for `count` distinct successfully consumed messages; returns all message lines."""
        self.wait_for(lambda ls: any(line.get("event") == "message" and line.get("ok_count", 0) >= count
                                     for line in ls), timeout, f"{count} successful messages")
        return self.messages()

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the child to exit by itself; kill it and raise CppPeerError if it does not."""
        if timeout is None:
            timeout = START_DEADLINE_S + self._run_for + SHUTDOWN_DEADLINE_S + 5.0
        try:
            code = self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self._kill()
            raise CppPeerError(self.report(f"C++ consumer killed: no exit within {timeout:g}s"), None,
                               self.lines()) from None
        self._finish()
        return code

    def stop(self, grace: float = STOP_GRACE_S) -> int:
        """SIGTERM (clean shutdown: offsets persisted, client unregistered), SIGKILL after `grace`."""
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(grace)
            except subprocess.TimeoutExpired:
                self._kill()
        self._finish()
        return self._proc.returncode

    def log_text(self, tail: int = _LOG_TAIL) -> str:
        """The last lines of the C++ client's own log files."""
        return _log_tail(self._home.path, tail)

    def report(self, headline: str) -> str:
        """A failure description; the child's home (with the C++ log) is then kept for inspection."""
        with self._cond:
            lines, stderr = list(self._lines), list(self._stderr)
        return _report(headline, self._proc.poll(), lines, stderr, self._home)

    def __enter__(self) -> "CppConsumer":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # ---- internals

    def _read_stdout(self) -> None:
        assert self._proc.stdout is not None
        for raw in self._proc.stdout:
            parsed = _parse_lines([raw.decode("utf-8", "replace")])
            with self._cond:
                self._lines.extend(parsed)
                self._cond.notify_all()
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    def _read_stderr(self) -> None:
        assert self._proc.stderr is not None
        for raw in self._proc.stderr:
            with self._cond:
                self._stderr.append(raw.decode("utf-8", "replace").rstrip("\n"))

    def _kill(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()

    def _finish(self) -> None:
        for reader in self._readers:
            reader.join(timeout=5.0)
        _LIVE.discard(self)
        self._home.release(ok=self._proc.returncode in (EXIT_OK, EXIT_TIMEOUT))


_LIVE: "weakref.WeakSet[CppConsumer]" = weakref.WeakSet()


@atexit.register
def _kill_leftovers() -> None:
    """A test that forgot stop() must not leave a C++ consumer in the group after pytest ends."""
    for consumer in list(_LIVE):
        consumer._kill()


# ----------------------------------------------------------------- pulling

def run_pull(namesrv: str, *, topic: str, group: str = "CG_cpp_pull", tags: str = "*",
             starts: Mapping[int, int] | None = None, max_num: int = 32, timeout: float = 60.0,
             log_level: str = "info", home: str | os.PathLike[str] | None = None
             ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Read every queue of `topic` with the C++ pull consumer from `starts` (queue id -> offset,
    default 0) to its end; returns (message lines, one ``queue`` line per queue)."""
    argv = ["pull", "--namesrv", namesrv, "--group", group, "--topic", topic, "--tags", tags,
            "--max-num", str(max_num), "--timeout", str(timeout), "--log-level", log_level]
    for qid, offset in (starts or {}).items():
        argv += ["--start", f"{qid}={offset}"]
    workdir = _Home(home)
    command = [sys.executable, "-u", str(PEER_SCRIPT), *argv, "--home", workdir.path]
    limit = START_DEADLINE_S + timeout + SHUTDOWN_DEADLINE_S + 5.0
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=limit, env=_child_env(workdir.path))
    except subprocess.TimeoutExpired as exc:
        lines = _parse_lines(_as_text(exc.stdout).splitlines())
        raise CppPeerError(_report(f"C++ pull consumer killed after {limit:g}s", None, lines,
                                   _as_text(exc.stderr).splitlines(), workdir), None, lines) from None
    lines = _parse_lines(proc.stdout.splitlines())
    if proc.returncode != EXIT_OK:
        raise CppPeerError(_report("C++ pull consumer failed", proc.returncode, lines, proc.stderr.splitlines(),
                                   workdir), proc.returncode, lines)
    workdir.release(ok=True)
    return ([line for line in lines if line.get("event") == "message"],
            [line for line in lines if line.get("event") == "queue"])


# ----------------------------------------------------------------- helpers

class _Home:
    """The child's $HOME: ours (removed after a clean run) or the caller's (left alone)."""

    def __init__(self, requested: str | os.PathLike[str] | None):
        self.owned = requested is None
        self.keep = False
        self.path = tempfile.mkdtemp(prefix="cpp-peer-") if requested is None else os.fspath(requested)
        os.makedirs(self.path, exist_ok=True)

    def release(self, ok: bool) -> None:
        if self.owned and ok and not self.keep:
            shutil.rmtree(self.path, ignore_errors=True)


def _child_env(home: str) -> dict[str, str]:
    env = dict(os.environ)
    env["HOME"] = home
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _opt(flag: str, value: object) -> list[str]:
    return [] if value is None else [flag, str(value)]


def _as_text(data: str | bytes | None) -> str:
    if data is None:
        return ""
    return data.decode("utf-8", "replace") if isinstance(data, bytes) else data


def _parse_lines(raw_lines: Iterable[str]) -> list[dict[str, Any]]:
    parsed = []
    for raw in raw_lines:
        text = raw.strip()
        if not text:
            continue
        try:
            value = json.loads(text)
        except ValueError:
            value = None
        parsed.append(value if isinstance(value, dict) else {"event": "raw", "text": text})
    return parsed


def _log_tail(home: str, tail: int) -> str:
    logdir = Path(home, "logs", "rocketmq-cpp")
    if not logdir.is_dir():
        return ""
    text: list[str] = []
    for path in sorted(logdir.iterdir()):
        text += path.read_text("utf-8", "replace").splitlines()
    return "\n".join(text[-tail:])


def _report(headline: str, returncode: int | None, lines: Sequence[dict[str, Any]], stderr: Sequence[str],
            home: "_Home") -> str:
    shown = [json.dumps(line) for line in lines if line.get("event") != "message"][-20:]
    home.keep = True
    parts = [f"{headline} (exit code {returncode}; C++ client home kept at {home.path})",
             "peer lines:", *(shown or ["  (none)"]),
             "stderr tail:", *(list(stderr)[-20:] or ["  (none)"]),
             "C++ client log tail:", _log_tail(home.path, _LOG_TAIL) or "  (no log)"]
    return "\n".join(parts)
