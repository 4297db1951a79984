#!/usr/bin/env python3
"""Drive the Apache RocketMQ C++ client (PyPI ``rocketmq==0.4.4``) from a child process.

Conformance tests use this client as software nobody on the project wrote: it
produces to and consumes from rmqrun's embedded broker, and its push consumer
shares consumer groups with rmqrun. It runs in its own process because
``librocketmq.so`` is native code with its own threads: a segfault, a call that
blocks inside C for a minute, or a crash in a static destructor at exit must
never take pytest down. ``tests/peers/cpp.py`` is the test-side handle.

Subcommands: ``probe`` (does the library load?), ``produce``, ``consume`` and
``pull`` (the C++ pull consumer, ``cpp_peer_pull.py``);
``--help`` on each lists the options.

Output protocol
    stdout carries only JSON objects, one per line, flushed per line, each with
    an ``event`` key (``started``, ``sent``, ``send_failed``, ``message``,
    ``callback_error``, ``shutdown``, ``done``, ``error``, ``probe``). File
    descriptor 1 is moved to stderr before the library loads, so anything the
    native code prints cannot corrupt the stream.

Exit codes (EXIT_* in cpp_peer_runtime.py)
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
import os
import sys
from pathlib import Path

if not __package__:  # run as a script: make the `tests.peers` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.peers.cpp_peer_runtime import (  # noqa: E402
    EXIT_CLIENT_ERROR, EXIT_OK, EXIT_USAGE, LOG_LEVELS, Output, check_loopback, finish, load_library, log_files,
    prepare_home,
)


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
    client.add_argument("--access-key", help="ACL 1.0: sign requests (set_session_credentials) with this key ...")
    client.add_argument("--secret-key", help="... and this secret")
    client.add_argument("--auth-channel", default="ALIYUN", help="the credentials' channel (the library's default)")

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
    pull = sub.add_parser("pull", parents=[client], help="pull every queue from given offsets to its end")
    pull.add_argument("--tags", default="*", help="tag expression of every pull")
    pull.add_argument("--start", action="append", default=[], metavar="QID=OFFSET",
                      help="start offset of a queue (repeatable; default 0)")
    pull.add_argument("--max-num", type=int, default=32, help="maxNums of each pull")
    pull.add_argument("--timeout", type=float, default=60.0, help="seconds for the whole read (exit 3 past it)")
    pull.add_argument("--pull-deadline", type=float, default=15.0,
                      help="seconds one Pull() may block before the watchdog exits with 5")
    return parser


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


# --------------------------------------------------------------------- main

def run_command(args: argparse.Namespace, out: Output, home: str) -> None:
    """Import the command's module only now: it must not load the library before $HOME is set."""
    if args.command == "probe":
        cmd_probe(args, out, home)
    elif args.command == "pull":
        from tests.peers.cpp_peer_pull import cmd_pull  # noqa: PLC0415
        cmd_pull(args, out, home)
    elif args.command == "produce":
        from tests.peers.cpp_peer_produce import cmd_produce  # noqa: PLC0415
        cmd_produce(args, out, home)
    else:
        from tests.peers.cpp_peer_consume import cmd_consume  # noqa: PLC0415
        cmd_consume(args, out, home)


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
        run_command(args, out, home)
    except ImportError as exc:
        out.emit("error", kind="library", error_type=type(exc).__name__, message=str(exc))
        finish(out, EXIT_CLIENT_ERROR)
    except Exception as exc:
        out.emit("error", kind="unexpected", error_type=type(exc).__name__, message=str(exc))
        finish(out, EXIT_CLIENT_ERROR)


if __name__ == "__main__":
    main()
