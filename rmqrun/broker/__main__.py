"""``python -m rmqrun.broker``: the embedded broker as a process (used by BrokerProcess and scripts).

The ``rmqrun broker`` CLI command calls the same :func:`rmqrun.broker.app.run`.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time

from rmqrun.broker.app import run
from rmqrun.event_loop import CHOICES


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rmqrun.broker", description=__doc__)
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--namesrv-port", type=int, default=9876)
    parser.add_argument("--broker-port", type=int, default=10911)
    parser.add_argument("--settings-json", default="{}", help="BrokerConfig overrides as a JSON object")
    parser.add_argument("--event-loop", choices=CHOICES, default="auto",
                        help="auto: uvloop when installed (rmqrun.event_loop)")
    parser.add_argument("--parent-pid", type=int, default=0,
                        help="shut down cleanly when this process is gone (no orphaned brokers after a crash)")
    args = parser.parse_args(argv)
    if args.parent_pid:
        _watch_parent(args.parent_pid)
    settings = json.loads(args.settings_json)
    if not isinstance(settings, dict):
        parser.error("--settings-json must be a JSON object")
    return run(args.data_dir, args.host, args.namesrv_port, args.broker_port, event_loop=args.event_loop, **settings)


def _watch_parent(pid: int) -> None:
    def watch() -> None:
        while os.getppid() == pid:
            time.sleep(1.0)
        os.kill(os.getpid(), signal.SIGTERM)  # the same clean shutdown as a SIGTERM from outside

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
