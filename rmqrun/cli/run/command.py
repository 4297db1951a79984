"""``rmqrun run``: consume with a pool of worker processes running HANDLER.

The command resolves the settings (flags, ``--config``, ``RMQRUN_*``: one
table), sets up logging, then runs the supervisor on the chosen event loop
with the metrics/health endpoints and systemd notifications beside it. Its
exit code is the supervisor's (:mod:`rmqrun.cli.exit_codes`), or 1 when the
metrics port cannot be had.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from rmqrun.cli import logs
from rmqrun.cli.exit_codes import EXIT_RUNTIME
from rmqrun.cli.handler_path import cwd_on_path
from rmqrun.cli.settings_options import settings_options


@click.command()
@settings_options
@click.option("--help-settings", is_flag=True, help="list every setting (YAML key, env var, flag, default)")
@click.option("--print-settings", is_flag=True, help="print each resolved value and where it came from, then exit")
def run(handler: str | None, config_file: str | None, help_settings: bool, print_settings: bool,
        **flags: object) -> None:
    """Consume with a pool of worker processes running HANDLER (module:function)."""
    from rmqrun.cli import settings as table
    if help_settings:
        click.echo(table.describe())
        return
    resolved = table.resolve({"handler": handler, **flags}, config_file=config_file)
    if print_settings:
        click.echo(table.describe(resolved))
        return
    logs.setup(resolved["log_level"], resolved["log_format"], namespace=resolved["namespace"])
    from rmqrun.client.failure_log import set_report_every
    set_report_every(resolved["log_repeat_interval"])
    settings = table.build(resolved)
    from rmqrun.cli.run.config_reload import config_reader
    # SIGHUP resolves the settings again (the file re-read) and applies what can change live
    settings.reload_config = config_reader({"handler": handler, **flags}, config_file, resolved)
    cwd_on_path()
    from rmqrun import event_loop
    from rmqrun.supervisor.signal_senders import command_signals_blocked
    # before the loop and its threads exist: a thread that has them unblocked takes them with no sender known
    with command_signals_blocked():
        code = event_loop.run(lambda loop_name: _run(settings, resolved, loop_name), resolved["event_loop"])
    sys.exit(code)


async def _run(settings: Any, resolved: Any, loop_name: str = "asyncio") -> int:
    from loguru import logger

    from rmqrun.cli.run.metrics import MetricsServer
    from rmqrun.cli.run.systemd import SystemdNotifier
    from rmqrun.pipe import procs
    from rmqrun.supervisor.supervisor import Supervisor
    logger.info("event loop: {} (event_loop={})", loop_name, resolved["event_loop"])
    settings.signal_senders = True  # this process is ours alone (the notifier below hooks into these settings)
    supervisor = Supervisor(settings)
    from rmqrun.cli.run import collector
    collector.settle()  # the process's long-lived objects exist now (collector.py says why)
    procs.set_title(procs.supervisor_title(settings.consumer.group, list(settings.consumer.subscriptions)))
    notifier = SystemdNotifier.from_env()
    notifier.attach(settings, supervisor)
    metrics: MetricsServer | None = None
    port, host = resolved["metrics_port"], resolved["metrics_host"]
    try:
        if port:
            metrics = MetricsServer(supervisor, host, port)
            try:
                await metrics.start()
            except OSError as exc:
                # a runtime condition (another process holds the port), not a bad setting: exit 1, which
                # the systemd unit restarts, not 2, which it never does
                message = (f"metrics_port={port} ({resolved.sources['metrics_port']}): cannot listen on "
                           f"{host}:{port}: {exc.strerror or exc}")
                logger.error("{}", message)
                notifier.notify(f"STATUS=exited: {message}", f"EXIT_STATUS={EXIT_RUNTIME}")
                metrics = None
                return EXIT_RUNTIME
        code = await supervisor.run()
        if code:
            notifier.notify(f"STATUS=exited with code {code}", f"EXIT_STATUS={code}")
        return code
    finally:
        notifier.stop()
        if metrics is not None:
            await metrics.close()
