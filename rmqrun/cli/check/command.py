"""``rmqrun check``: the command; what it verifies, in order, is :mod:`rmqrun.cli.check.steps`."""

from __future__ import annotations

import sys

import click

from rmqrun.cli import logs
from rmqrun.cli.handler_path import cwd_on_path
from rmqrun.cli.settings_options import settings_options


@click.command()
@settings_options
@click.option("--timeout", default=5.0, show_default=True, type=click.FloatRange(min=0.1),
              help="seconds to wait for the name server and each broker")
def check(handler: str | None, config_file: str | None, timeout: float, **flags: object) -> None:
    """Validate the settings, import the handler and hooks, reach the name server and brokers.

    Takes the same arguments as `rmqrun run`. Exit 0 when `run` would start, else
    2 (settings), 3 (handler or hook) or 1 (name server, topic or broker). The
    report goes to stdout either way (the exit code says how it went), so
    `rmqrun check ... > report.txt` keeps all of it.
    """
    from rmqrun.cli.check.steps import run_check
    cwd_on_path()
    logs.setup("ERROR", role="check")
    report = run_check({"handler": handler, **flags}, config_file, timeout)
    click.echo(report.text())
    sys.exit(report.code)
