"""``rmqrun demo``: the command; the demo itself (broker, backlog, pool, summary) is :mod:`rmqrun.cli.demo.runner`."""

from __future__ import annotations

import os
import sys

import click

from rmqrun.cli import logs
from rmqrun.cli.flags import Shown, check_log_level, log_level_option
from rmqrun.cli.handler_path import cwd_on_path
from rmqrun.supervisor.pool_config import MAX_WORKERS


@click.command()
@click.option("-m", "--messages", type=click.IntRange(min=1), default=20_000, show_default=True,
              help="messages to produce and consume")
@click.option("--cpu-ms", type=click.FloatRange(min=0), default=1.0, show_default=True,
              help="CPU milliseconds the handler burns per message")
@click.option("-w", "--workers", type=click.IntRange(1, MAX_WORKERS), default=None, cls=Shown, shown="CPU count",
              help="worker processes")
@click.option("--handler", default="workers.cpu:handle", show_default=True,
              help="handler to run (reads RMQRUN_HANDLER_CPU_MS)")
@log_level_option("ERROR")
@click.option("--order-by", type=click.Choice(["queue", "key"]), default=None, cls=Shown, shown="none: concurrently",
              help="consume in order, by queue or by key, from a topic with fewer queues than workers")
@click.option("--queues", type=click.IntRange(1, 64), default=None, cls=Shown,
              shown="the broker's default; with --order-by: half the workers", help="queues of the demo topic")
def demo(messages: int, cpu_ms: float, workers: int | None, handler: str, log_level: str,
         order_by: str | None, queues: int | None) -> None:
    """Start an embedded broker, produce a backlog and consume it with a worker pool.

    Everything lives in a temporary directory that is removed at the end, Ctrl-C included.
    """
    from rmqrun.cli.demo.runner import DemoOptions, run_demo
    log_level = check_log_level(log_level)
    logs.setup(log_level, role="demo")
    cwd_on_path()
    opts = DemoOptions(messages=messages, cpu_ms=cpu_ms, workers=workers or os.cpu_count() or 1, handler=handler,
                       tty=sys.stdout.isatty(), log_level=log_level.upper(), order_by=order_by, queues=queues)
    sys.exit(run_demo(opts))
