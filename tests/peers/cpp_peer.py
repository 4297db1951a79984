#!/usr/bin/env python3
"""Drive the Apache RocketMQ C++ client (PyPI ``rocketmq==0.4.4``) from a child process.

Conformance tests use this client as software nobody on the project wrote: it
produces to and consumes from rmqrun's embedded broker, and its push consumer
shares consumer groups with rmqrun. It runs in its own process because
``librocketmq.so`` is native code with its own threads: a segfault, a call that
blocks inside C for a minute, or a crash in a static destructor at exit must
never take pytest down. ``tests/peers/cpp.py`` is the test-side handle.

Subcommands: ``probe`` (does the library load?), ``produce`` and ``consume``;
``--help`` on each lists the options.

Output protocol
    stdout carries only JSON objects, one per line, flushed per line, each with
    an ``event`` key (``started``, ``sent``, ``send_failed``, ``message``,
    ``callback_error``, ``shutdown``, ``done``, ``error``, ``probe``). File
    descriptor 1 is moved to stderr before the library loads, so anything the
    native code prints cannot corrupt the stream.

Exit codes (EXIT_* below)
    0 success; 1 a send failed or was not SEND_OK; 2 bad arguments; 3 consume
    timed out before ``--expect`` messages; 4 the library did not load or the
    client did not start; 5 a native call overran its deadline (the watchdog
    killed the process, because a blocked C call cannot be interrupted).

Logs
    This build writes its log to ``$HOME/logs/rocketmq-cpp/<pid>_rocketmq-cpp.log.N``
    (``Set*LogPath`` is a no-op) and broadcasting offsets to
    ``$HOME/.rocketmq_offsets``. ``--home DIR`` (default: a fresh temp dir)
    becomes ``$HOME`` before the library loads, so nothing lands in the real home.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import os
import signal
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Callable

EXIT_OK = 0
EXIT_SEND_FAILED = 1
EXIT_USAGE = 2
EXIT_TIMEOUT = 3
EXIT_CLIENT_ERROR = 4
EXIT_HUNG = 5

CONSUME_SUCCESS = 0  # the C API's E_CONSUME_SUCCESS
RECONSUME_LATER = 1  # any other value makes the C++ listener answer RECONSUME_LATER

LOG_LEVELS = {"fatal": 1, "error": 2, "warn": 3, "info": 4, "debug": 5, "trace": 6}

# Properties worth reporting on a received message: the harness's own
# (idx, shard), ones test producers commonly set, and RocketMQ system ones.
PROPERTY_NAMES = (
    "idx", "shard", "color", "seq",
    "UNIQ_KEY", "KEYS", "TAGS", "WAIT", "DELAY", "RETRY_TOPIC", "REAL_TOPIC", "REAL_QID",
    "ORIGIN_MESSAGE_ID", "RECONSUME_TIME", "MAX_RECONSUME_TIMES", "CONSUME_START_TIME",
    "PGROUP", "MIN_OFFSET", "MAX_OFFSET", "TRAN_MSG", "MSG_REGION", "TRACE_ON",
)

LOOPBACK_HOSTS = ("localhost", "::1", "[::1]")


class Output:
    """The JSON-lines stream on the real stdout; safe to call from any thread."""

    def __init__(self) -> None:
        sys.stdout.flush()
        self._stream = io.TextIOWrapper(os.fdopen(os.dup(1), "wb", buffering=0), encoding="utf-8",
                                        write_through=True)
        os.dup2(2, 1)  # native printf() output now goes to stderr
        sys.stdout = sys.stderr
        self._lock = threading.Lock()

    def emit(self, event: str, **fields: Any) -> None:
        line = json.dumps({"event": event, **fields}, default=str, ensure_ascii=False)
        with self._lock:
            self._stream.write(line + "\n")
            self._stream.flush()


class Watchdog:
    """Kills the process when one native call runs past its deadline.

    A Python thread cannot interrupt a blocked ctypes call; against a silent
    name server the C++ producer sits in one send for 60 s. Exiting with a
    clear line beats letting the parent's timeout guess what happened.
    """

    def __init__(self, out: Output) -> None:
        self._out = out
        self._cond = threading.Condition()
        self._label: str | None = None
        self._deadline = 0.0
        self._limit = 0.0
        threading.Thread(target=self._run, name="watchdog", daemon=True).start()

    def arm(self, label: str, seconds: float) -> None:
        with self._cond:
            self._label, self._limit = label, seconds
            self._deadline = time.monotonic() + seconds
            self._cond.notify()

    def disarm(self) -> None:
        with self._cond:
            self._label = None
            self._cond.notify()

    def _run(self) -> None:
        with self._cond:
            while True:
                if self._label is None:
                    self._cond.wait()
                    continue
                remaining = self._deadline - time.monotonic()
                if remaining > 0:
                    self._cond.wait(remaining)
                    continue
                self._out.emit("error", kind="deadline", operation=self._label, deadline_s=self._limit,
                               message=f"{self._label} still blocked in librocketmq after {self._limit:g}s")
                sys.stderr.flush()
                os._exit(EXIT_HUNG)


# ---------------------------------------------------------------- arguments

def _csv(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _prop(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected k=v, got {text!r}")
    return key, value


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--home", help="directory used as $HOME for the C++ client's logs "
                                       "(default: a fresh temp dir, reported in the 'started' line)")
    common.add_argument("--log-level", choices=sorted(LOG_LEVELS), default="info",
                        help="C++ client log level (global in the library); default info")

    client = argparse.ArgumentParser(add_help=False, parents=[common])
    client.add_argument("--namesrv", required=True, help="name server address H:P (several: H:P;H:P)")
    client.add_argument("--group", required=True, help="producer or consumer group")
    client.add_argument("--topic", required=True)
    client.add_argument("--instance-name", help="client instance name (default: the library's DEFAULT)")
    client.add_argument("--start-deadline", type=float, default=20.0,
                        help="seconds start() may block before the watchdog exits with 5 (default 20; "
                             "a push consumer blocks 10 s in start() against a silent name server)")
    client.add_argument("--shutdown-deadline", type=float, default=20.0,
                        help="seconds shutdown() may block before the watchdog exits with 5 (default 20; "
                             "a push consumer blocks 13 s in shutdown() against a silent name server)")
    client.add_argument("--allow-non-loopback", action="store_true",
                        help="allow a name server that is not on 127.0.0.0/8 or localhost")

    parser = argparse.ArgumentParser(prog="cpp_peer.py", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    sub.add_parser("probe", parents=[common], help="load librocketmq and report what it offers")

    prod = sub.add_parser("produce", parents=[client], help="send --count messages, one JSON line each")
    prod.add_argument("--count", type=int, required=True)
    prod.add_argument("--tags", type=_csv, default=[], help="tags cycled over the messages, e.g. TagA,TagB")
    prod.add_argument("--keys-prefix", help="keys are <prefix>-<index>")
    prod.add_argument("--prop", type=_prop, action="append", default=[], metavar="K=V",
                      help="user property added to every message (repeatable); 'idx' is always set")
    prod.add_argument("--orderly", action="store_true", help="send with a queue selector (sharding key)")
    prod.add_argument("--sharding-key-mod", type=int, default=1,
                      help="with --orderly, message i has sharding key i %% M (queue = key %% queue count)")
    prod.add_argument("--oneway", action="store_true", help="oneway sends (no result)")
    prod.add_argument("--batch", type=int, default=0, help="send batches of this many messages")
    prod.add_argument("--body-size", type=int, help="body length in bytes (printable ASCII, starts 'cpp-peer #i')")
    prod.add_argument("--delay-level", type=int, default=0, help="delay time level for every message")
    prod.add_argument("--send-timeout-ms", type=int, default=3000, help="the client's send timeout")
    prod.add_argument("--send-deadline", type=float, default=15.0,
                      help="seconds one send may block before the watchdog exits with 5 (default 15)")
    prod.add_argument("--keep-going", action="store_true", help="continue after a failed send")

    cons = sub.add_parser("consume", parents=[client], help="push-consume, one JSON line per delivery")
    cons.add_argument("--tags", default="*", help="subscription expression, e.g. 'TagA || TagB'")
    cons.add_argument("--orderly", action="store_true", help="orderly listener")
    cons.add_argument("--broadcasting", action="store_true", help="BROADCASTING instead of CLUSTERING")
    cons.add_argument("--fail-first", type=_csv, default=[], metavar="IDX,...",
                      help="answer RECONSUME_LATER on the first delivery of these idx values")
    cons.add_argument("--fail-always", type=_csv, default=[], metavar="IDX,...",
                      help="answer RECONSUME_LATER on every delivery of these idx values")
    cons.add_argument("--expect", type=int, help="exit 0 after this many distinct successful messages")
    cons.add_argument("--timeout", type=float, default=60.0,
                      help="seconds to run; with --expect, reaching it exits 3 (default 60)")
    cons.add_argument("--linger", type=float, default=0.0,
                      help="seconds to keep consuming after --expect is reached (default 0)")
    cons.add_argument("--threads", type=int, help="consume thread count")
    cons.add_argument("--batch-max", type=int,
                      help="consumeMessageBatchMaxSize; no effect in this build: the listener always gets a "
                           "whole pull result, and one RECONSUME_LATER sends all of it back, unseen ones too")
    cons.add_argument("--work-ms", type=float, default=0.0, help="sleep this long in each callback")
    cons.add_argument("--read-prop", action="append", default=[], metavar="NAME",
                      help="extra property name to report (repeatable)")
    return parser


def check_loopback(namesrv: str) -> str | None:
    """Return an error text unless every name server is on loopback."""
    for addr in filter(None, namesrv.split(";")):
        host, _, port = addr.rpartition(":")
        if not port.isdigit() or not host:
            return f"bad name server address {addr!r}: expected H:P"
        if not (host.startswith("127.") or host in LOOPBACK_HOSTS):
            return f"name server {addr!r} is not on loopback (pass --allow-non-loopback to allow it)"
    return None


# ------------------------------------------------------------------ library

def prepare_home(requested: str | None) -> str:
    """Make the C++ client's $HOME a directory we own, before the library reads it."""
    home = os.path.abspath(requested) if requested else tempfile.mkdtemp(prefix="cpp-peer-")
    os.makedirs(home, exist_ok=True)
    os.environ["HOME"] = home  # os.environ assignment also calls putenv() for the C getenv()
    return home


def load_library() -> SimpleNamespace:
    """Import the wrapper (which loads librocketmq.so) and return the pieces we use."""
    from rocketmq import client, ffi  # noqa: PLC0415 - must follow prepare_home()
    from rocketmq.exceptions import RocketMQException, ffi_check  # noqa: PLC0415
    return SimpleNamespace(client=client, ffi=ffi, dll=ffi.dll, check=ffi_check, Error=RocketMQException,
                           path=ffi._DYLIB_PATH)


def log_files(home: str) -> list[str]:
    logdir = os.path.join(home, "logs", "rocketmq-cpp")
    if not os.path.isdir(logdir):
        return []
    return sorted(os.path.join(logdir, name) for name in os.listdir(logdir))


def finish(out: Output, code: int, **fields: Any) -> None:
    """Report and leave without running native static destructors (they can crash at exit)."""
    out.emit("done", exit_code=code, **fields)
    sys.stderr.flush()
    os._exit(code)


# -------------------------------------------------------------------- probe

REQUIRED_SYMBOLS = (
    "CreateProducer", "StartProducer", "SendMessageSync", "SendMessageOneway", "SendMessageOrderly",
    "SendBatchMessage", "SetByteMessageBody", "SetProducerInstanceName", "SetProducerLogLevel",
    "CreatePushConsumer", "Subscribe", "RegisterMessageCallback", "RegisterMessageCallbackOrderly",
    "SetPushConsumerLogLevel", "GetMessageProperty", "GetMessageQueueOffset", "GetMessageReconsumeTimes",
)


def cmd_probe(args: argparse.Namespace, out: Output, home: str) -> None:
    lib = load_library()
    missing = [name for name in REQUIRED_SYMBOLS if not hasattr(lib.dll, name)]
    handle = lib.dll.CreateProducer(b"cpp_peer_probe")  # runs native code, initialises logging
    out.emit("probe", ok=not missing and bool(handle), library=lib.path, size=os.path.getsize(lib.path),
             missing_symbols=missing, home=home, log_files=log_files(home), pid=os.getpid())
    finish(out, EXIT_OK if not missing and handle else EXIT_CLIENT_ERROR)


# ------------------------------------------------------------------ produce

def make_body(idx: int, size: int | None) -> bytes:
    """Printable ASCII (never NUL: the consumer reads bodies as C strings)."""
    head = f"cpp-peer #{idx}".encode()
    if size is None:
        return head
    filler = b" abcdefghijklmnopqrstuvwxyz0123456789"
    body = head + filler * ((size // len(filler)) + 1)
    return body[:size]


def build_message(lib: SimpleNamespace, args: argparse.Namespace, idx: int) -> tuple[Any, dict[str, Any]]:
    msg = lib.client.Message(args.topic)
    info: dict[str, Any] = {}
    if args.tags:
        info["tags"] = args.tags[idx % len(args.tags)]
        msg.set_tags(info["tags"])
    if args.keys_prefix:
        info["keys"] = f"{args.keys_prefix}-{idx}"
        msg.set_keys(info["keys"])
    body = make_body(idx, args.body_size)
    lib.check(lib.dll.SetByteMessageBody(msg, body, len(body)))
    info["body_len"] = len(body)
    msg.set_property("idx", str(idx))
    if args.orderly:
        info["shard"] = idx % args.sharding_key_mod
        msg.set_property("shard", str(info["shard"]))
    for key, value in args.prop:
        msg.set_property(key, value)
    if args.delay_level:
        msg.set_delay_time_level(args.delay_level)
    return msg, info


def cmd_produce(args: argparse.Namespace, out: Output, home: str) -> None:
    if args.count < 0 or args.sharding_key_mod < 1 or args.batch < 0:
        out.emit("error", kind="usage", message="--count >= 0, --sharding-key-mod >= 1, --batch >= 0")
        finish(out, EXIT_USAGE)
    if args.batch and (args.orderly or args.oneway):
        out.emit("error", kind="usage", message="--batch cannot be combined with --orderly or --oneway")
        finish(out, EXIT_USAGE)
    lib = load_library()
    dog = Watchdog(out)
    try:
        producer = lib.client.Producer(args.group, timeout=args.send_timeout_ms)
        lib.check(lib.dll.SetProducerLogLevel(producer._handle, LOG_LEVELS[args.log_level]))
        if args.instance_name:
            lib.check(lib.dll.SetProducerInstanceName(producer._handle, args.instance_name.encode()))
        producer.set_namesrv_addr(args.namesrv)
        dog.arm("producer start", args.start_deadline)
        producer.start()
        dog.disarm()
    except lib.Error as exc:
        out.emit("error", kind="start", error_type=type(exc).__name__, message=str(exc))
        finish(out, EXIT_CLIENT_ERROR)
    out.emit("started", role="producer", pid=os.getpid(), group=args.group, topic=args.topic, home=home,
             library=lib.path)

    ok = failed = 0
    step = args.batch or 1
    for first in range(0, args.count, step):
        indexes = list(range(first, min(first + step, args.count)))
        built = [build_message(lib, args, idx) for idx in indexes]
        chosen: dict[str, int] = {}
        began = time.monotonic()
        dog.arm(f"send #{first}", args.send_deadline)
        try:
            result = send(producer, args, [m for m, _ in built], built[0][1].get("shard", 0), chosen)
            error = None
        except lib.Error as exc:
            result, error = None, exc
        finally:
            dog.disarm()
        elapsed_ms = round((time.monotonic() - began) * 1000, 3)
        for pos, (idx, (_, info)) in enumerate(zip(indexes, built)):
            common = {"index": idx, "elapsed_ms": elapsed_ms, **info, **chosen}
            if args.batch:
                common.update(batch=first // step, batch_pos=pos)
            if error is not None:
                failed += 1
                out.emit("send_failed", error_type=type(error).__name__, error=str(error), **common)
            elif result is None:  # oneway: the client reports nothing
                ok += 1
                out.emit("sent", status="ONEWAY", status_code=None, msg_id=None, offset=None, **common)
            else:
                good = result.status == 0
                ok, failed = ok + good, failed + (not good)
                out.emit("sent", status=result.status.name, status_code=int(result.status), msg_id=result.msg_id,
                         offset=result.offset, **common)
        if failed and not args.keep_going:
            break

    dog.arm("producer shutdown", args.shutdown_deadline)
    producer.shutdown()
    dog.disarm()
    finish(out, EXIT_OK if failed == 0 and ok == args.count else EXIT_SEND_FAILED, ok=ok, failed=failed,
           requested=args.count)


def send(prod: Any, args: argparse.Namespace, msgs: list[Any], shard: int, chosen: dict[str, int]) -> Any:
    """One send call in the requested mode; `chosen` receives the selector's queue choice."""
    if args.batch:
        return prod.send_batch(msgs)

    def selector(mq_size: int, _msg: Any, _arg: Any) -> int:
        queue = shard % mq_size  # what the package's hashing_queue_selector does with the key
        chosen.update(queue=queue, queue_count=mq_size)
        return queue

    msg = msgs[0]
    if args.orderly and args.oneway:
        prod.send_oneway_orderly(msg, shard, queue_selector=selector)
        return None
    if args.orderly:
        return prod.send_orderly(msg, shard, queue_selector=selector)
    if args.oneway:
        prod.send_oneway(msg)
        return None
    return prod.send_sync(msg)


# ------------------------------------------------------------------ consume

def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _safe(read: Callable[[], Any]) -> Any:
    try:
        return read()
    except Exception as exc:  # an accessor must not kill the callback
        return f"<unreadable: {type(exc).__name__}: {exc}>"


def describe(dll: Any, handle: int, extra_props: list[str]) -> dict[str, Any]:
    """Everything the C API lets us read from one received message.

    The body comes back as a C string: bytes after a NUL are lost, which is why
    the producer side only sends printable bodies.
    """
    body = _safe(lambda: dll.GetMessageBody(handle)) or b""
    info: dict[str, Any] = {
        "topic": _text(_safe(lambda: dll.GetMessageTopic(handle))),
        "tags": _text(_safe(lambda: dll.GetMessageTags(handle))),
        "keys": _text(_safe(lambda: dll.GetMessageKeys(handle))),
        "msg_id": _text(_safe(lambda: dll.GetMessageId(handle))),
        "queue_id": _safe(lambda: dll.GetMessageQueueId(handle)),
        "queue_offset": _safe(lambda: dll.GetMessageQueueOffset(handle)),
        "commit_log_offset": _safe(lambda: dll.GetMessageCommitLogOffset(handle)),
        "reconsume_times": _safe(lambda: dll.GetMessageReconsumeTimes(handle)),
        "delay_time_level": _safe(lambda: dll.GetMessageDelayTimeLevel(handle)),
        "store_size": _safe(lambda: dll.GetMessageStoreSize(handle)),
        "born_timestamp": _safe(lambda: dll.GetMessageBornTimestamp(handle)),
        "store_timestamp": _safe(lambda: dll.GetMessageStoreTimestamp(handle)),
        "prepared_transaction_offset": _safe(lambda: dll.GetMessagePreparedTransactionOffset(handle)),
        "body_len": len(body) if isinstance(body, bytes) else None,
    }
    if isinstance(body, bytes):
        try:
            info["body"] = body.decode("utf-8")
        except UnicodeDecodeError:
            info["body_b64"] = base64.b64encode(body).decode("ascii")
    props = {}
    for name in (*PROPERTY_NAMES, *extra_props):
        value = _text(_safe(lambda: dll.GetMessageProperty(handle, name.encode())))
        if value:  # the C API answers "" for an absent property
            props[name] = value
    info["properties"] = props
    return info


@dataclass
class ConsumeState:
    """What the callbacks decide and count; guarded by `lock` (callbacks run on C++ threads).

    Messages are told apart by UNIQ_KEY; `fail_first` fails each listed idx once per message.
    """

    fail_first: set[str]
    fail_always: set[str]
    expect: int | None
    lock: threading.Lock = field(default_factory=threading.Lock)
    failed_once: set[str] = field(default_factory=set)
    ok_keys: set[str] = field(default_factory=set)
    deliveries: int = 0
    callback_errors: int = 0
    reached: threading.Event = field(default_factory=threading.Event)

    def verdict(self, info: dict[str, Any]) -> tuple[int, int, int]:
        """Decide one delivery; returns (status, delivery number, distinct successes so far)."""
        props = info["properties"]
        idx = props.get("idx")
        # UNIQ_KEY is the producer-made id that survives a trip through the retry topic;
        # idx is only a label (two producer runs both have an idx 0).
        identity = props.get("UNIQ_KEY") or info["msg_id"]
        with self.lock:
            self.deliveries += 1
            if idx is not None and (idx in self.fail_always or (idx in self.fail_first
                                                                 and identity not in self.failed_once)):
                self.failed_once.add(identity)
                status = RECONSUME_LATER
            else:
                status = CONSUME_SUCCESS
                self.ok_keys.add(identity)
                if self.expect is not None and len(self.ok_keys) >= self.expect:
                    self.reached.set()
            return status, self.deliveries, len(self.ok_keys)


def cmd_consume(args: argparse.Namespace, out: Output, home: str) -> None:
    lib = load_library()
    dog = Watchdog(out)
    state = ConsumeState(set(args.fail_first), set(args.fail_always), args.expect)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    began = time.monotonic()

    def on_message(_consumer: int, handle: int) -> int:
        try:
            info = describe(lib.dll, handle, args.read_prop)
            if args.work_ms:
                time.sleep(args.work_ms / 1000)
            status, delivery, ok_count = state.verdict(info)
            out.emit("message", delivery=delivery, ok_count=ok_count,
                     verdict="CONSUME_SUCCESS" if status == CONSUME_SUCCESS else "RECONSUME_LATER",
                     thread=threading.get_native_id(), time_ms=int(time.time() * 1000),
                     since_start_ms=round((time.monotonic() - began) * 1000, 3), **info)
            return status
        except BaseException as exc:  # never let an exception cross into C++
            with state.lock:
                state.callback_errors += 1
            out.emit("callback_error", error_type=type(exc).__name__, error=str(exc))
            return RECONSUME_LATER

    model = lib.ffi.MessageModel.BROADCASTING if args.broadcasting else lib.ffi.MessageModel.CLUSTERING
    # The package's subscribe() ignores the callback's return value and raises out of
    # the ctypes callback on error, so the verdict would be undefined; register our own.
    callback = lib.ffi.MSG_CALLBACK_FUNC(on_message)
    try:
        consumer = lib.client.PushConsumer(args.group, orderly=args.orderly, message_model=model)
        handle = consumer._handle
        lib.check(lib.dll.SetPushConsumerLogLevel(handle, LOG_LEVELS[args.log_level]))
        consumer.set_namesrv_addr(args.namesrv)
        if args.instance_name:
            consumer.set_instance_name(args.instance_name)
        if args.threads:
            consumer.set_thread_count(args.threads)
        if args.batch_max:
            consumer.set_message_batch_max_size(args.batch_max)
        lib.check(lib.dll.Subscribe(handle, args.topic.encode(), args.tags.encode()))
        register = lib.dll.RegisterMessageCallbackOrderly if args.orderly else lib.dll.RegisterMessageCallback
        lib.check(register(handle, callback))
        dog.arm("consumer start", args.start_deadline)
        consumer.start()  # ~10 s against a name server that accepts but never answers
        dog.disarm()
    except lib.Error as exc:
        out.emit("error", kind="start", error_type=type(exc).__name__, message=str(exc))
        finish(out, EXIT_CLIENT_ERROR)
    out.emit("started", role="consumer", pid=os.getpid(), group=args.group, topic=args.topic,
             expression=args.tags, orderly=args.orderly, broadcasting=args.broadcasting, home=home,
             library=lib.path, start_ms=round((time.monotonic() - began) * 1000, 3))

    deadline = began + args.timeout
    while not stop.is_set() and not state.reached.is_set() and time.monotonic() < deadline:
        state.reached.wait(min(0.1, max(0.0, deadline - time.monotonic())))
    if state.reached.is_set():
        reason, code = "expect", EXIT_OK
        stop.wait(args.linger)
    elif stop.is_set():
        reason, code = "signal", EXIT_OK
    else:
        reason, code = "timeout", EXIT_TIMEOUT if args.expect is not None else EXIT_OK

    shutdown_began = time.monotonic()
    dog.arm("consumer shutdown", args.shutdown_deadline)
    consumer.shutdown()  # persists offsets and unregisters the client
    dog.disarm()
    out.emit("shutdown", elapsed_ms=round((time.monotonic() - shutdown_began) * 1000, 3))
    with state.lock:
        summary = {"reason": reason, "ok_count": len(state.ok_keys), "deliveries": state.deliveries,
                   "callback_errors": state.callback_errors, "expect": args.expect}
    finish(out, code, **summary)  # never returns, so `callback` outlives the C++ pointer to it


# --------------------------------------------------------------------- main

COMMANDS = {"probe": cmd_probe, "produce": cmd_produce, "consume": cmd_consume}


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)  # exits 2 on bad arguments
    out = Output()
    if args.command != "probe" and not args.allow_non_loopback:
        problem = check_loopback(args.namesrv)
        if problem:
            out.emit("error", kind="usage", message=problem)
            finish(out, EXIT_USAGE)
    home = prepare_home(args.home)
    try:
        COMMANDS[args.command](args, out, home)
    except ImportError as exc:
        out.emit("error", kind="library", error_type=type(exc).__name__, message=str(exc))
        finish(out, EXIT_CLIENT_ERROR)
    except Exception as exc:
        out.emit("error", kind="unexpected", error_type=type(exc).__name__, message=str(exc))
        finish(out, EXIT_CLIENT_ERROR)


if __name__ == "__main__":
    main()
