"""The ``consume`` command of the C++ peer: a push consumer printing one JSON line per delivery.

The verdict for each delivery is decided here (``--fail-first`` / ``--fail-always``
by the ``idx`` property) and returned to the C++ listener explicitly, because
the package's own ``subscribe()`` ignores a callback's return value.

Facts about this C++ client build that shape what tests can expect:

* The listener gets a whole pull result at once (``consumeMessageBatchMaxSize``
  is not used), the C API calls our callback message by message and stops at
  the first RECONSUME_LATER, and the client then sends back *every* message of
  that pull result, so messages never shown to the callback come back from the
  retry topic with reconsume_times 1.
* Orderly RECONSUME_LATER suspends the queue (~100 ms) and redelivers the same
  message locally, without incrementing reconsume_times and without a send-back.
"""

from __future__ import annotations

import argparse
import base64
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from tests.peers.cpp_peer_runtime import (
    EXIT_CLIENT_ERROR, EXIT_OK, EXIT_TIMEOUT, LOG_LEVELS, Library, Output, Watchdog, finish, load_library,
)

CONSUME_SUCCESS = 0  # the C API's E_CONSUME_SUCCESS
RECONSUME_LATER = 1  # any other value makes the C++ listener answer RECONSUME_LATER

# Properties reported on every delivery when present: the harness's own (idx,
# shard), ones test producers commonly set, and RocketMQ system properties.
PROPERTY_NAMES = (
    "idx", "shard", "color", "seq",
    "UNIQ_KEY", "KEYS", "TAGS", "WAIT", "DELAY", "RETRY_TOPIC", "REAL_TOPIC", "REAL_QID",
    "ORIGIN_MESSAGE_ID", "RECONSUME_TIME", "MAX_RECONSUME_TIMES", "CONSUME_START_TIME",
    "PGROUP", "MIN_OFFSET", "MAX_OFFSET", "TRAN_MSG", "MSG_REGION", "TRACE_ON", "CLUSTER",
)


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _safe(read: Callable[[], Any]) -> Any:
    try:
        return read()
    except Exception as exc:  # one unreadable field must not lose the whole line
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

    Messages are told apart by UNIQ_KEY, the producer-made id that survives a
    trip through the retry topic; idx is only a label (two producer runs both
    have an idx 0), so `fail_first` fails each matching message once.
    """

    fail_first: set[str]
    fail_always: set[str]
    expect: int | None
    #: held across a delivery's verdict and its line (re-entered by :meth:`verdict`), so the lines leave in the
    #: order of the counts they carry: a reader that sees ``ok_count`` N has read every earlier success's line
    lock: threading.RLock = field(default_factory=threading.RLock)
    failed_once: set[str] = field(default_factory=set)
    ok_keys: set[str] = field(default_factory=set)
    deliveries: int = 0
    callback_errors: int = 0
    reached: threading.Event = field(default_factory=threading.Event)

    def verdict(self, info: dict[str, Any]) -> tuple[int, int, int]:
        """Decide one delivery; returns (status, delivery number, distinct successes so far)."""
        idx = info["properties"].get("idx")
        identity = info["properties"].get("UNIQ_KEY") or info["msg_id"]
        with self.lock:
            self.deliveries += 1
            fail = idx is not None and (idx in self.fail_always
                                        or (idx in self.fail_first and identity not in self.failed_once))
            if fail:
                self.failed_once.add(identity)
                return RECONSUME_LATER, self.deliveries, len(self.ok_keys)
            self.ok_keys.add(identity)
            if self.expect is not None and len(self.ok_keys) >= self.expect:
                self.reached.set()
            return CONSUME_SUCCESS, self.deliveries, len(self.ok_keys)


def start_consumer(lib: Library, args: argparse.Namespace, out: Output, dog: Watchdog, callback: Any) -> Any:
    model = lib.ffi.MessageModel.BROADCASTING if args.broadcasting else lib.ffi.MessageModel.CLUSTERING
    try:
        consumer = lib.client.PushConsumer(args.group, orderly=args.orderly, message_model=model)
        handle = consumer._handle
        lib.check(lib.dll.SetPushConsumerLogLevel(handle, LOG_LEVELS[args.log_level]))
        consumer.set_namesrv_addr(args.namesrv)
        if args.access_key:
            consumer.set_session_credentials(args.access_key, args.secret_key or "", args.auth_channel)
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
        consumer.start()  # blocks ~10 s against a name server that accepts but never answers
        dog.disarm()
    except lib.error as exc:
        out.emit("error", kind="start", error_type=type(exc).__name__, message=str(exc))
        finish(out, EXIT_CLIENT_ERROR)
    return consumer


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
            with state.lock:  # the verdict and its line together (ConsumeState.lock)
                status, delivery, ok_count = state.verdict(info)
                out.emit("message", delivery=delivery, ok_count=ok_count,
                         verdict="CONSUME_SUCCESS" if status == CONSUME_SUCCESS else "RECONSUME_LATER",
                         thread=threading.get_native_id(), time_ms=int(time.time() * 1000),
                         since_start_ms=round((time.monotonic() - began) * 1000, 3), **info)
            return status
        except BaseException as exc:  # an exception must never unwind into C++
            with state.lock:
                state.callback_errors += 1
            out.emit("callback_error", error_type=type(exc).__name__, error=str(exc))
            return RECONSUME_LATER

    callback = lib.ffi.MSG_CALLBACK_FUNC(on_message)  # referenced until finish(): C++ holds a raw pointer
    consumer = start_consumer(lib, args, out, dog, callback)
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
    consumer.shutdown()  # persists offsets, unlocks orderly queues, unregisters the client
    dog.disarm()
    out.emit("shutdown", elapsed_ms=round((time.monotonic() - shutdown_began) * 1000, 3))
    with state.lock:
        summary = {"reason": reason, "ok_count": len(state.ok_keys), "deliveries": state.deliveries,
                   "callback_errors": state.callback_errors, "expect": args.expect}
    finish(out, code, **summary)
