"""The ``rmqrun`` command.

Commands: ``run`` (the worker-pool consumer), ``check`` (what ``run`` would
verify, without consuming), ``produce``, ``status`` (consumer progress and
lag), ``read`` (print a topic's messages), ``topic`` and ``offsets`` (what
operators do with mqadmin), ``demo`` (everything on one
machine) and ``broker`` (the embedded name server + broker). ``run`` and ``check`` take the same settings, all from one
table (:mod:`rmqrun.cli.settings`): flags, the YAML ``--config`` file and
``RMQRUN_*`` variables, the command line winning.

Exit codes: 0 success; 1 a runtime failure (failed sends, the pool gave up,
a busy metrics port; ``run`` waits for an unreachable cluster rather than
exiting); 2 an invalid or missing setting; 3 the handler or a worker hook does
not load at start; 130 interrupted (``demo``). ``config/README.md`` has the table.
"""

from __future__ import annotations

import asyncio
import errno
import os
import sys
from typing import Any, Callable

import click

from rmqrun import __version__
from rmqrun.cli import logs
from rmqrun.cli.namespace_option import namespace_option, resolve_namespace
from rmqrun.errors import ConfigError, RmqrunError

EXIT_RUNTIME, EXIT_CONFIG = 1, 2


class _Group(click.Group):
    """Turn rmqrun's own errors into one clear line and exit code 2, not a traceback."""

    def invoke(self, ctx: click.Context):  # type: ignore[no-untyped-def]
        try:
            return super().invoke(ctx)
        except ConfigError as exc:
            click.echo(f"rmqrun: error: {exc}", err=True)
            ctx.exit(EXIT_CONFIG)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 120})
@click.version_option(__version__, prog_name="rmqrun")
def cli() -> None:
    """rmqrun: a process-pool consumer runner for Apache RocketMQ.

    Start with `rmqrun demo`.
    """


def _cwd_on_path() -> None:
    """Handlers are usually modules in the current directory (as with gunicorn); workers inherit sys.path."""
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)


def _settings_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``HANDLER``, ``--config`` and a flag per setting that has one (from the settings table)."""
    from rmqrun.cli.settings import SETTINGS
    for s in reversed(SETTINGS):
        if s.flag is None:
            continue
        if s.is_flag:
            fn = click.option(s.flag, s.key, is_flag=True, default=None, help=s.help)(fn)
        elif s.multiple:
            fn = click.option(s.flag, s.key, multiple=True, help=s.help, metavar=s.key.upper())(fn)
        else:
            fn = click.option(s.flag, s.key, default=None, help=s.help, metavar=s.key.upper())(fn)
    fn = click.option("--config", "config_file", type=click.Path(dir_okay=False),
                      help="YAML file of settings (see config/example.yaml)")(fn)
    return click.argument("handler", required=False)(fn)


# --------------------------------------------------------------------------- run

@cli.command()
@_settings_options
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
    settings = table.build(resolved)
    _cwd_on_path()
    from rmqrun.cli import event_loop
    sys.exit(event_loop.run(lambda loop_name: _run(settings, resolved, loop_name), resolved["event_loop"]))


async def _run(settings: Any, resolved: Any, loop_name: str = "asyncio") -> int:
    from loguru import logger

    from rmqrun.cli.metrics import MetricsServer
    from rmqrun.cli.systemd import SystemdNotifier
    from rmqrun.supervisor.supervisor import Supervisor
    logger.info("event loop: {} (event_loop={})", loop_name, resolved["event_loop"])
    supervisor = Supervisor(settings)
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


# --------------------------------------------------------------------------- check

@cli.command()
@_settings_options
@click.option("--timeout", default=5.0, show_default=True, type=click.FloatRange(min=0.1),
              help="seconds to wait for the name server and each broker")
def check(handler: str | None, config_file: str | None, timeout: float, **flags: object) -> None:
    """Validate the settings, import the handler and hooks, reach the name server and brokers.

    Takes the same arguments as `rmqrun run`. Exit 0 when `run` would start, else
    2 (settings), 3 (handler or hook) or 1 (name server, topic or broker).
    """
    from rmqrun.cli.check import run_check
    _cwd_on_path()
    logs.setup("ERROR", role="check")
    report = run_check({"handler": handler, **flags}, config_file, timeout)
    click.echo(report.text(), err=report.code != 0)
    sys.exit(report.code)


# --------------------------------------------------------------------------- produce

def _namesrv(namesrv: str | None, config_file: str | None) -> str:
    """The name server from --namesrv, else the settings table (env, NAMESRV_ADDR, --config)."""
    from rmqrun.cli import settings as table
    resolved = table.resolve({"namesrv": namesrv}, config_file=config_file)
    if not resolved["namesrv"]:
        raise ConfigError("missing namesrv (--namesrv, $NAMESRV_ADDR or RMQRUN_NAMESRV)")
    return str(resolved["namesrv"])


def _security_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The ACL/TLS flags (``--access-key``, ``--secret-key-file``, ``--tls``...); see rmqrun/cli/security.py."""
    from rmqrun.cli.security_options import security_options
    return security_options(fn)


def _security_for(flags: dict[str, Any], config_file: str | None) -> Any:
    from rmqrun.cli.security_options import security_for
    return security_for(flags, config_file)


def _stdin_is_data() -> bool:
    """stdin is a pipe or a redirected file (not a terminal, not /dev/null): produce reads its lines."""
    import stat
    try:
        mode = os.fstat(sys.stdin.fileno()).st_mode
    except (OSError, ValueError, AttributeError):
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISREG(mode)


@cli.command()
@click.option("--namesrv", help="name server address(es) (default $NAMESRV_ADDR)")
@click.option("--config", "config_file", type=click.Path(dir_okay=False), help="take namesrv/topic from this YAML")
@click.option("--topic", "topics", multiple=True, help="topic to send to (default: the config's topic)")
@click.option("-n", "--count", type=click.IntRange(min=0),
              help="send N messages: the first N lines of --file or piped stdin, else N generated ones")
@click.option("--file", "file", type=click.File("rb"),
              help="send each line of FILE as a message ('-': stdin; default: stdin when it is a pipe or a file)")
@click.option("--body", default="message {i}", show_default=True, help="body template of generated messages")
@click.option("--tags", help="tag of every message")
@click.option("--keys", help="KEYS template, e.g. 'order-{i}'")
@click.option("--property", "properties", multiple=True, metavar="K=V", help="user property (repeatable)")
@click.option("--sharding-key", help="orderly send: messages with equal keys go to one queue, in order; "
                                     "template, e.g. 'user-{i%8}'")
@click.option("--delay-level", type=click.IntRange(0, 18), default=0, show_default=True,
              help="delay level (1=1s ... 18=2h; 0: none)")
@click.option("--concurrency", type=click.IntRange(1, 4096), default=64, show_default=True,
              help="sends in flight at once")
@click.option("--batch", type=click.IntRange(1, 1024), default=1, show_default=True,
              help="messages per request (SEND_BATCH_MESSAGE; not with --sharding-key or --delay-level)")
@click.option("--group", default="rmqrun_producer", show_default=True, help="producer group")
@namespace_option
@_security_options
def produce(namesrv: str | None, config_file: str | None, topics: tuple[str, ...], count: int | None, file: Any,
            body: str, tags: str | None, keys: str | None, properties: tuple[str, ...], sharding_key: str | None,
            delay_level: int, concurrency: int, batch: int, group: str, namespace: str | None,
            security_flags: dict[str, Any]) -> None:
    """Send messages: each line of --file or of piped stdin, or --count N generated ones."""
    from rmqrun.cli import produce as p
    from rmqrun.cli import settings as table
    from rmqrun.client.producer import Producer
    if len(topics) > 1:
        raise ConfigError(f"--topic is given {len(topics)} times ({', '.join(topics)}): produce sends to one "
                          "topic; run it once per topic")
    topic = topics[0] if topics else None
    addr = _namesrv(namesrv, config_file)
    security = _security_for(security_flags, config_file)
    if topic is None and config_file:
        topic = table.resolve({}, config_file=config_file)["topic"]
    if not topic:
        raise ConfigError("missing topic (--topic)")
    topic = table.BY_KEY["topic"].convert(topic, "command line --topic")
    namespace = resolve_namespace(namespace, config_file)

    def template_of(option: str, text: str | None) -> Any:
        try:
            return p.Template(text) if text else None
        except ValueError as exc:
            raise ConfigError(f"{option}: {exc}") from None

    template = template_of("--body", body)
    try:
        spec = p.ProduceSpec(topic, tags=tags, keys=template_of("--keys", keys),
                             sharding_key=template_of("--sharding-key", sharding_key),
                             properties=p.parse_properties(properties), delay_level=delay_level)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if batch > 1 and (sharding_key or delay_level):
        raise ConfigError("--batch cannot be combined with --sharding-key or --delay-level")
    if file is None and _stdin_is_data():
        file = click.get_binary_stream("stdin")
    if file is None and count is None:
        raise ConfigError("nothing to send: give --count N, --file FILE, or pipe lines on stdin")
    total = count if count is not None else None
    logs.setup("ERROR", role="produce")
    show_bar = sys.stderr.isatty() and total is not None

    async def main() -> p.ProduceReport:
        bodies = p.generated(count or 0, template) if file is None else p.lines_of(file.readline, count)
        async with Producer(addr, group, namespace=namespace, security=security) as producer:
            if not show_bar:
                return await p.produce(producer, spec, bodies, concurrency=concurrency, batch=batch)
            with click.progressbar(length=total, label=f"sending to {topic}", file=sys.stderr,
                                   show_pos=True, show_eta=True) as bar:
                return await p.produce(producer, spec, bodies, concurrency=concurrency, batch=batch,
                                       on_sent=bar.update)

    report = asyncio.run(main())
    click.echo(report.summary(topic))
    sys.exit(EXIT_RUNTIME if report.failed else 0)


# --------------------------------------------------------------------------- status

@cli.command()
@click.option("--group", help="consumer group (default: the config's group)")
@click.option("--topic", "topics", multiple=True, help="only this topic (repeatable; default: the group's topics)")
@click.option("--namesrv", help="name server address(es) (default $NAMESRV_ADDR)")
@click.option("--config", "config_file", type=click.Path(dir_okay=False), help="take namesrv/group from this YAML")
@click.option("--json", "as_json", is_flag=True, help="one JSON object (with --watch: one per line)")
@click.option("--watch", is_flag=True, help="repeat every --interval seconds until Ctrl-C")
@click.option("--interval", type=click.FloatRange(min=0.1), default=2.0, show_default=True,
              help="seconds between rounds of --watch")
@namespace_option
@_security_options
def status(group: str | None, topics: tuple[str, ...], namesrv: str | None, config_file: str | None,
           as_json: bool, watch: bool, interval: float, namespace: str | None,
           security_flags: dict[str, Any]) -> None:
    """Per queue: broker offset, consumer offset and lag of a consumer group.

    Exit 1 when the cluster cannot answer or no broker knows the group.
    """
    import time

    from rmqrun.cli import settings as table
    resolved = table.resolve({"namesrv": namesrv, "group": group}, config_file=config_file)
    gap = table.missing(resolved, {"namesrv": "--namesrv or $NAMESRV_ADDR", "group": "--group"})
    if gap is not None:
        raise gap
    chosen = [table.BY_KEY["topic"].convert(t, "command line --topic") for t in topics]
    namespace = resolve_namespace(namespace, config_file)
    security = _security_for(security_flags, config_file)
    logs.setup("ERROR", role="status")
    group_name = resolved["group"]
    try:
        while True:
            _status_round(resolved["namesrv"], group_name, chosen, as_json, watch, namespace, security)
            if not watch:
                return
            time.sleep(interval)
    except KeyboardInterrupt:  # the end of --watch, wherever Ctrl-C lands
        if not watch:
            raise


def _status_round(namesrv: str, group: str, topics: list[str], as_json: bool, watch: bool,
                  namespace: str | None = None, security: Any = None) -> None:
    """One table (or JSON line) of ``rmqrun status``; exit 1 on failure, except transient ones under --watch
    (a refusal, ACL or TLS, is not transient: it ends --watch too)."""
    import json

    from rmqrun.cli.status import StatusError, UnknownGroupError, progress, render, to_json
    from rmqrun.remoting.errors import AccessDeniedError, TlsError
    try:
        rows = asyncio.run(progress(namesrv, group, topics, security, namespace=namespace))
    except (UnknownGroupError, AccessDeniedError, TlsError) as exc:
        click.echo(f"rmqrun: error: {exc}", err=True)
        sys.exit(EXIT_RUNTIME)
    except (StatusError, RmqrunError, OSError, asyncio.TimeoutError) as exc:
        click.echo(f"rmqrun: error: {exc or type(exc).__name__}", err=True)
        if not watch:
            sys.exit(EXIT_RUNTIME)
        return
    if as_json:
        click.echo(json.dumps(to_json(rows, group, namespace)))
        return
    if watch and sys.stdout.isatty():
        click.clear()
    click.echo(render(rows, group, namespace))


# --------------------------------------------------------------------------- read

from rmqrun.cli.read import read as _read  # noqa: E402  (the command lives beside its reader)

cli.add_command(_read)

from rmqrun.cli.spark import spark as _spark  # noqa: E402  (rmqrun spark: a handler over a topic on Spark)

cli.add_command(_spark)

from rmqrun.cli.offsets import offsets as _offsets  # noqa: E402  (rmqrun offsets reset)
from rmqrun.cli.topic import topic as _topic  # noqa: E402  (rmqrun topic create|update|delete|list|describe)

cli.add_command(_topic)
cli.add_command(_offsets)


# --------------------------------------------------------------------------- demo

@cli.command()
@click.option("-n", "--messages", type=click.IntRange(min=1), default=20_000, show_default=True,
              help="messages to produce and consume")
@click.option("--cpu-ms", type=click.FloatRange(min=0), default=1.0, show_default=True,
              help="CPU milliseconds the handler burns per message")
@click.option("-w", "--workers", type=click.IntRange(1, 1024), default=None, help="worker processes [CPU count]")
@click.option("--handler", default="workers.cpu:handle", show_default=True,
              help="handler to run (reads RMQRUN_HANDLER_CPU_MS)")
@click.option("--log-level", default="ERROR", show_default=True,
              type=click.Choice(["TRACE", "DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False))
@click.option("--order-by", type=click.Choice(["queue", "key"]), default=None,
              help="consume in order, by queue or by key (default: concurrently), from a topic with fewer queues "
                   "than workers")
@click.option("--queues", type=click.IntRange(1, 64), default=None,
              help="queues of the demo topic [the broker's default; with --order-by: half the workers]")
def demo(messages: int, cpu_ms: float, workers: int | None, handler: str, log_level: str,
         order_by: str | None, queues: int | None) -> None:
    """Start an embedded broker, produce a backlog and consume it with a worker pool.

    Everything lives in a temporary directory that is removed at the end, Ctrl-C included.
    """
    from rmqrun.cli.demo import DemoOptions, run_demo
    logs.setup(log_level.upper(), role="demo")
    _cwd_on_path()
    opts = DemoOptions(messages=messages, cpu_ms=cpu_ms, workers=workers or os.cpu_count() or 1, handler=handler,
                       tty=sys.stdout.isatty(), log_level=log_level.upper(), order_by=order_by, queues=queues)
    sys.exit(run_demo(opts))


# --------------------------------------------------------------------------- broker

@cli.command()
@click.option("--data-dir", default="./rmqrun-data", show_default=True, help="where messages and state are stored")
@click.option("--host", default="127.0.0.1", show_default=True, help="address to bind (loopback by default)")
@click.option("--namesrv-port", default=9876, show_default=True, type=click.IntRange(0, 65535))
@click.option("--broker-port", default=10911, show_default=True, type=click.IntRange(0, 65535))
@click.option("--flush", type=click.Choice(["sync", "async"]), default="sync", show_default=True,
              help="sync: SEND_OK only after fsync")
@click.option("--log-level", default="INFO", show_default=True,
              help="TRACE, DEBUG, INFO, SUCCESS, WARNING, ERROR or CRITICAL")
@click.option("--log-format", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--advertise-host", default=None,
              help="IP registered with the name server for clients [default: --host if concrete, else the first "
                   "non-loopback address]")
@click.option("--file-reserved-hours", type=click.FloatRange(min=0, min_open=True), default=72, show_default=True,
              help="retention: commit-log files last written longer ago are deleted")
@click.option("--delete-when", default="04", show_default=True,
              help="retention: hour(s) of the day expired files are deleted ('04' or '04;16')")
@click.option("--disk-max-used-space-ratio", type=click.IntRange(10, 95), default=75, show_default=True,
              help="retention: above this disk use (percent) expired files are deleted at once")
@click.option("--acl", "acl_file", default=None, metavar="FILE",
              help="check every broker request against this plain_acl.yml (RocketMQ 4.x layout); "
                   "the name server stays open")
@click.option("--tls-cert", default=None, metavar="PEM", help="certificate chain: both servers speak TLS")
@click.option("--tls-key", default=None, metavar="PEM", help="private key of --tls-cert")
@click.option("--tls-mode", type=click.Choice(["permissive", "enforcing"]), default=None,
              help="permissive: TLS and plain clients on the same port; enforcing: TLS only [default: permissive]")
@click.option("--order-message-enable", is_flag=True,
              help="the name server puts ordered topics' order conf (topic create --order) in their routes")
def broker(data_dir: str, host: str, namesrv_port: int, broker_port: int, flush: str, log_level: str,
           log_format: str, advertise_host: str | None, file_reserved_hours: float, delete_when: str,
           disk_max_used_space_ratio: int, acl_file: str | None, tls_cert: str | None, tls_key: str | None,
           tls_mode: str | None, order_message_enable: bool) -> None:
    """Run the embedded name server and broker until SIGINT/SIGTERM."""
    from rmqrun.broker.app import run as run_broker
    from rmqrun.broker.store.errors import DataDirError, StoreLockedError
    from rmqrun.cli.settings import LOG_LEVELS
    if log_level.upper() not in LOG_LEVELS:
        raise ConfigError(f"--log-level {log_level!r} is invalid: one of {', '.join(LOG_LEVELS)}")
    logs.setup(log_level.upper(), log_format, role="broker")
    try:
        code = run_broker(data_dir, host=host, namesrv_port=namesrv_port, broker_port=broker_port, flush_mode=flush,
                          advertise_host=advertise_host, file_reserved_hours=file_reserved_hours,
                          delete_when=delete_when, disk_max_used_space_ratio=disk_max_used_space_ratio,
                          acl_file=acl_file, tls_cert=tls_cert, tls_key=tls_key, tls_mode=tls_mode,
                          order_message_enable=order_message_enable, ready_line=log_format != "json")
    except ValueError as exc:  # a bad setting: named as its option, with what is allowed
        text = str(exc)
        for name in ("advertise_host", "delete_when", "file_reserved_hours", "disk_max_used_space_ratio"):
            text = text.replace(f"{name}=", f"--{name.replace('_', '-')} ")
        click.echo(f"rmqrun: error: {text}", err=True)
        sys.exit(EXIT_CONFIG)
    except DataDirError as exc:  # a file, not writable, in use, disk full: the directory is named
        click.echo(f"rmqrun: error: cannot start the broker: {exc}", err=True)
        # In use or a full disk: the setting is right, the moment is not (1). A file or a
        # read-only directory: --data-dir must change (2).
        cause = exc.__cause__
        full = isinstance(cause, OSError) and cause.errno in (errno.ENOSPC, errno.EDQUOT)
        sys.exit(EXIT_RUNTIME if isinstance(exc, StoreLockedError) or full else EXIT_CONFIG)
    except OSError as exc:
        click.echo(f"rmqrun: error: cannot start the broker: {exc.strerror or exc} "
                   f"(ports {namesrv_port}/{broker_port} on {host})", err=True)
        sys.exit(EXIT_RUNTIME)
    sys.exit(code)


def main() -> None:
    cli(prog_name="rmqrun")


if __name__ == "__main__":
    main()
