"""The ``pull`` command of the C++ peer: the C++ ``DefaultMQPullConsumer`` reading queues from given offsets.

What this build's C API offers a pull consumer is small, and it shapes what can
be tested against it: ``FetchSubscriptionMessageQueues`` and ``Pull(mq,
expression, offset, maxNums)``, nothing else. There is no fetchConsumeOffset /
updateConsumeOffset in the C API (the Python wrapper keeps offsets in a
class-level dict that starts every queue at 0), so the C++ pull consumer can
neither read nor commit a group's offset on the broker. The caller therefore
passes the start offset of each queue (``--start QUEUE_ID=OFFSET``), e.g. the
offsets rmqrun committed, and the peer reads each queue from there until
NO_NEW_MSG, one JSON line per message and one ``queue`` line per queue with the
statuses it saw and where it stopped.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import time

from tests.peers.cpp_peer_consume import describe
from tests.peers.cpp_peer_runtime import (
    EXIT_CLIENT_ERROR, EXIT_OK, EXIT_TIMEOUT, LOG_LEVELS, Output, Watchdog, finish, load_library,
)

STATUS_NAMES = {0: "FOUND", 1: "NO_NEW_MSG", 2: "NO_MATCHED_MSG", 3: "OFFSET_ILLEGAL", 4: "BROKER_TIMEOUT"}


def parse_starts(items: list[str]) -> dict[int, int]:
    starts: dict[int, int] = {}
    for item in items:
        qid, sep, offset = item.partition("=")
        if not sep or not qid.strip().isdigit() or not offset.strip().lstrip("-").isdigit():
            raise argparse.ArgumentTypeError(f"expected QUEUE_ID=OFFSET, got {item!r}")
        starts[int(qid)] = int(offset)
    return starts


def cmd_pull(args: argparse.Namespace, out: Output, home: str) -> None:
    lib = load_library()
    dll, ffi = lib.dll, lib.ffi
    dog = Watchdog(out)
    starts = parse_starts(args.start)
    began = time.monotonic()
    try:
        handle = dll.CreatePullConsumer(args.group.encode())
        if not handle:
            raise lib.error("CreatePullConsumer returned null")
        lib.check(dll.SetPullConsumerLogLevel(handle, LOG_LEVELS[args.log_level]))
        lib.check(dll.SetPullConsumerNameServerAddress(handle, args.namesrv.encode()))
        dog.arm("pull consumer start", args.start_deadline)
        lib.check(dll.StartPullConsumer(handle))
        dog.disarm()
    except lib.error as exc:
        out.emit("error", kind="start", error_type=type(exc).__name__, message=str(exc))
        finish(out, EXIT_CLIENT_ERROR)
    out.emit("started", role="pull", pid=os.getpid(), group=args.group, topic=args.topic, home=home,
             library=lib.path)

    queues = ctypes.POINTER(ffi._CMessageQueue)()
    size = ctypes.c_int()
    dog.arm("fetch queues", args.start_deadline)
    lib.check(dll.FetchSubscriptionMessageQueues(handle, args.topic.encode(), ctypes.pointer(queues),
                                                 ctypes.pointer(size)))
    dog.disarm()
    deadline = began + args.timeout
    total = 0
    code = EXIT_OK
    for i in range(int(size.value)):
        mq = queues[i]
        offset = starts.get(mq.queueId, 0)
        first = offset
        statuses: list[str] = []
        while True:
            if time.monotonic() > deadline:
                code = EXIT_TIMEOUT
                break
            dog.arm("pull", args.pull_deadline)
            result = dll.Pull(handle, ctypes.pointer(mq), args.tags.encode(), ctypes.c_longlong(offset),
                              args.max_num)
            dog.disarm()
            status = STATUS_NAMES.get(result.pullStatus, str(result.pullStatus))
            statuses.append(status)
            if status == "FOUND":
                for k in range(int(result.size)):
                    out.emit("message", **describe(dll, result.msgFoundList[k], []))
                    total += 1
            next_offset = result.nextBeginOffset
            dll.ReleasePullResult(result)
            if status in ("NO_NEW_MSG", "OFFSET_ILLEGAL") or status == "BROKER_TIMEOUT":
                break
            offset = next_offset
        out.emit("queue", broker=mq.brokerName.decode(), queue_id=mq.queueId, start=first, next=offset,
                 statuses=statuses)
    dll.ReleaseSubscriptionMessageQueue(queues)
    dog.arm("pull consumer shutdown", args.shutdown_deadline)
    dll.ShutdownPullConsumer(handle)
    dog.disarm()
    finish(out, code, messages=total, queues=int(size.value))
