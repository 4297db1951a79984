"""The ``rmqrun`` command.

Commands: ``broker`` (embedded name server + broker), ``run`` (the worker
pool consumer), ``produce``, ``status``, ``check``, ``demo``. Every ``run``
setting comes from one table (:mod:`rmqrun.cli.settings`): flags, the YAML
``--config`` file and ``RMQRUN_*`` variables, command line winning.
"""

from __future__ import annotations

import asyncio
import sys

import click

from rmqrun import __version__
from rmqrun.cli import logs
from rmqrun.errors import ConfigError


class _Group(click.Group):
    """Turn rmqrun's own errors into one clear line and exit code 2, not a traceback."""

    def invoke(self, ctx: click.Context):  # type: ignore[no-untyped-def]
        try:
            return super().invoke(ctx)
        except ConfigError as exc:
            click.echo(f"rmqrun: error: {exc}", err=True)
            ctx.exit(2)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="rmqrun")
def cli() -> None:
    """rmqrun: a process-pool consumer runner for Apache RocketMQ."""


# --------------------------------------------------------------------------- broker

@cli.command()
@click.option("--data-dir", default="./rmqrun-data", show_default=True, help="where messages and state are stored")
@click.option("--host", default="127.0.0.1", show_default=True, help="address to bind (loopback by default)")
@click.option("--namesrv-port", default=9876, show_default=True, type=click.IntRange(0, 65535))
@click.option("--broker-port", default=10911, show_default=True, type=click.IntRange(0, 65535))
@click.option("--flush", type=click.Choice(["sync", "async"]), default="sync", show_default=True,
              help="sync: SEND_OK only after fsync")
@click.option("--log-level", default="INFO", show_default=True)
def broker(data_dir: str, host: str, namesrv_port: int, broker_port: int, flush: str, log_level: str) -> None:
    """Run the embedded name server and broker until SIGINT/SIGTERM."""
    from rmqrun.broker.app import run as run_broker
    logs.setup(log_level, role="broker")
    sys.exit(run_broker(data_dir, host=host, namesrv_port=namesrv_port, broker_port=broker_port, flush_mode=flush))


# --------------------------------------------------------------------------- run

def _run_options(fn):  # type: ignore[no-untyped-def]
    from rmqrun.cli.settings import SETTINGS
    for s in reversed(SETTINGS):
        if s.flag is None:
            continue
        if s.parse.__name__ == "parse_bool":
            fn = click.option(s.flag, s.key, is_flag=True, default=None, help=s.help)(fn)
        else:
            fn = click.option(s.flag, s.key, default=None, help=s.help, metavar=s.key.upper())(fn)
    return fn


@cli.command(context_settings={"max_content_width": 120})
@click.argument("handler", required=False)
@click.option("--config", "config_file", type=click.Path(dir_okay=False), help="YAML file of settings")
@click.option("--help-settings", is_flag=True, help="list every setting (YAML key, env var, flag, default)")
@_run_options
def run(handler: str | None, config_file: str | None, help_settings: bool, **flags: object) -> None:
    """Consume with a pool of worker processes running HANDLER (module:function)."""
    from rmqrun.cli import settings as table
    from rmqrun.cli.systemd import SystemdNotifier
    from rmqrun.supervisor.supervisor import Supervisor
    if help_settings:
        click.echo(table.describe())
        return
    resolved = table.resolve({"handler": handler, **flags}, config_file=config_file)
    logs.setup(resolved["log_level"], resolved["log_format"])
    settings = table.build(resolved)
    notifier = SystemdNotifier.from_env()
    supervisor = Supervisor(settings)
    notifier.attach(settings, supervisor)

    async def main() -> int:
        try:
            return await supervisor.run()
        finally:
            notifier.stop()

    sys.exit(asyncio.run(main()))


def main() -> None:
    cli(prog_name="rmqrun")


if __name__ == "__main__":
    main()
