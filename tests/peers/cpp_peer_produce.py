"""The ``produce`` command of the C++ peer: send N messages, one JSON line per message.

Message i carries the user property ``idx=i`` (and ``shard=i % M`` when
orderly), so a consumer on the other side can be told which message to fail and
tests can match deliveries to sends. Bodies are printable ASCII because the C
API hands received bodies back as NUL-terminated strings.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

from tests.peers.cpp_peer_runtime import (
    EXIT_CLIENT_ERROR, EXIT_OK, EXIT_SEND_FAILED, EXIT_USAGE, LOG_LEVELS, Library, Output, Watchdog, finish,
    load_library,
)


def make_body(idx: int, size: int | None) -> bytes:
    """``cpp-peer #<idx>``, padded or cut to `size` bytes; never a NUL."""
    head = f"cpp-peer #{idx}".encode()
    if size is None:
        return head
    filler = b" abcdefghijklmnopqrstuvwxyz0123456789"
    return (head + filler * (size // len(filler) + 1))[:size]


def build_message(lib: Library, args: argparse.Namespace, idx: int) -> tuple[Any, dict[str, Any]]:
    """The message for index `idx`, and what the result line should say about it."""
    msg = lib.client.Message(args.topic)
    info: dict[str, Any] = {}
    if args.tags:
        info["tags"] = args.tags[idx % len(args.tags)]
        msg.set_tags(info["tags"])
    if args.keys_prefix:
        info["keys"] = f"{args.keys_prefix}-{idx}"
        msg.set_keys(info["keys"])
    body = make_body(idx, args.body_size)
    lib.check(lib.dll.SetByteMessageBody(msg, body, len(body)))  # set_body() would stop at a NUL
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


def send(producer: Any, args: argparse.Namespace, msgs: list[Any], shard: int, chosen: dict[str, int]) -> Any:
    """One send call in the requested mode; `chosen` receives the selector's queue choice.

    Returns the wrapper's SendResult, or None for oneway sends (which report nothing).
    """
    if args.batch:
        return producer.send_batch(msgs)

    def selector(queue_count: int, _msg: Any, _arg: Any) -> int:
        queue = shard % queue_count  # what the package's hashing_queue_selector does with the key
        chosen.update(queue=queue, queue_count=queue_count)
        return queue

    msg = msgs[0]
    if args.orderly and args.oneway:
        producer.send_oneway_orderly(msg, shard, queue_selector=selector)
        return None
    if args.orderly:
        return producer.send_orderly(msg, shard, queue_selector=selector)
    if args.oneway:
        producer.send_oneway(msg)
        return None
    return producer.send_sync(msg)


def start_producer(lib: Library, args: argparse.Namespace, out: Output, dog: Watchdog) -> Any:
    try:
        producer = lib.client.Producer(args.group, timeout=args.send_timeout_ms)
        lib.check(lib.dll.SetProducerLogLevel(producer._handle, LOG_LEVELS[args.log_level]))
        if args.instance_name:  # not wrapped by the package, but exported by the library
            lib.check(lib.dll.SetProducerInstanceName(producer._handle, args.instance_name.encode()))
        producer.set_namesrv_addr(args.namesrv)
        if args.access_key:
            producer.set_session_credentials(args.access_key, args.secret_key or "", args.auth_channel)
        dog.arm("producer start", args.start_deadline)
        producer.start()
        dog.disarm()
    except lib.error as exc:
        out.emit("error", kind="start", error_type=type(exc).__name__, message=str(exc))
        finish(out, EXIT_CLIENT_ERROR)
    return producer


def cmd_produce(args: argparse.Namespace, out: Output, home: str) -> None:
    if args.count < 0 or args.sharding_key_mod < 1 or args.batch < 0:
        out.emit("error", kind="usage", message="need --count >= 0, --sharding-key-mod >= 1, --batch >= 0")
        finish(out, EXIT_USAGE)
    if args.batch and (args.orderly or args.oneway):
        out.emit("error", kind="usage", message="--batch cannot be combined with --orderly or --oneway")
        finish(out, EXIT_USAGE)
    lib = load_library()
    dog = Watchdog(out)
    producer = start_producer(lib, args, out, dog)
    out.emit("started", role="producer", pid=os.getpid(), group=args.group, topic=args.topic, home=home,
             library=lib.path)

    ok = failed = 0
    step = args.batch or 1
    for first in range(0, args.count, step):
        indexes = range(first, min(first + step, args.count))
        built = [build_message(lib, args, idx) for idx in indexes]
        chosen: dict[str, int] = {}
        began = time.monotonic()
        dog.arm(f"send #{first}", args.send_deadline)
        try:
            result, error = send(producer, args, [m for m, _ in built], built[0][1].get("shard", 0), chosen), None
        except lib.error as exc:
            result, error = None, exc
        finally:
            dog.disarm()
        elapsed_ms = round((time.monotonic() - began) * 1000, 3)
        for pos, (idx, (_, info)) in enumerate(zip(indexes, built)):
            line = {"index": idx, "elapsed_ms": elapsed_ms, **info, **chosen}
            if args.batch:
                line.update(batch=first // step, batch_pos=pos)
            if error is not None:
                failed += 1
                out.emit("send_failed", error_type=type(error).__name__, error=str(error), **line)
            elif result is None:
                ok += 1
                out.emit("sent", status="ONEWAY", status_code=None, msg_id=None, offset=None, **line)
            else:
                good = int(result.status) == 0  # SEND_OK; a flush/slave timeout counts as a failure here
                ok, failed = ok + good, failed + (not good)
                out.emit("sent", status=result.status.name, status_code=int(result.status), msg_id=result.msg_id,
                         offset=result.offset, **line)
        if failed and not args.keep_going:
            break

    dog.arm("producer shutdown", args.shutdown_deadline)
    producer.shutdown()  # sends UNREGISTER_CLIENT
    dog.disarm()
    code = EXIT_OK if failed == 0 and ok == args.count else EXIT_SEND_FAILED
    finish(out, code, ok=ok, failed=failed, requested=args.count)
