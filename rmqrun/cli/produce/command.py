"""``rmqrun produce``: the command's options and checks; sending is :mod:`rmqrun.cli.produce.sender`.

Every option is checked before anything connects, so a bad template or a
forbidden combination is exit 2 with the option named, never a half-sent run.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import sys
from typing import Any

import click

from rmqrun.cli import logs
from rmqrun.cli.cluster import resolve_namesrv
from rmqrun.cli.exit_codes import EXIT_OK, EXIT_RUNTIME
from rmqrun.cli.flags import Shown, config_option, namesrv_flag
from rmqrun.cli.namespace_option import namespace_option, resolve_namespace
from rmqrun.cli.security_options import security_for, security_options
from rmqrun.errors import ConfigError


def _stdin_is_data() -> bool:
    """stdin is a pipe or a redirected file (not a terminal, not /dev/null): produce reads its lines."""
    import stat
    try:
        mode = os.fstat(sys.stdin.fileno()).st_mode
    except (OSError, ValueError, AttributeError):
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISREG(mode)


def _one_topic(topics: tuple[str, ...]) -> str | None:
    """The --topic given, if any; produce sends to one topic."""
    if len(topics) > 1:
        raise ConfigError(f"--topic is given {len(topics)} times ({', '.join(topics)}): produce sends to one "
                          "topic; run it once per topic")
    return topics[0] if topics else None


def _topic_of(topic: str | None, config_file: str | None) -> str:
    """--topic, else the config's; checked as the settings table checks it."""
    from rmqrun.cli import settings as table
    if topic is None and config_file:
        topic = table.resolve({}, config_file=config_file)["topic"]
    if not topic:
        raise ConfigError("missing topic (--topic)")
    return str(table.BY_KEY["topic"].convert(topic, "command line --topic"))


def _template(option: str, text: str | None) -> Any:
    """``text`` as a template (None when not given); a bad one is a ConfigError naming ``option``."""
    from rmqrun.cli.produce import sender as p
    try:
        return p.Template(text) if text else None
    except ValueError as exc:
        raise ConfigError(f"{option}: {exc}") from None


def _start_otel() -> None:
    try:
        from rmqrun.worker import otel
    except ImportError as exc:
        raise ConfigError(f"--otel needs OpenTelemetry ({exc}): pip install 'rmqrun[otel]'") from None
    otel.configure_sdk()
    atexit.register(otel.shutdown)  # the spans are exported before the command ends


def _check_trace_topic(topic: str) -> None:
    from rmqrun.client.producer import check_topic
    try:
        check_topic(topic)
    except ValueError as exc:
        raise ConfigError(f"--msg-trace-topic: {exc}") from None


def _spec(topic: str, tags: str | None, keys: str | None, sharding_key: str | None,
          properties: tuple[str, ...], delay_level: int) -> Any:
    from rmqrun.cli.produce import sender as p
    from rmqrun.remoting.message_props import check_property_text
    try:
        # a separator in a key, tag or sharding key would add or change properties of every message sent
        for option, text in (("--tags", tags), ("--keys", keys), ("--sharding-key", sharding_key)):
            if text:
                check_property_text(option, text)
        return p.ProduceSpec(topic, tags=tags, keys=_template("--keys", keys),
                             sharding_key=_template("--sharding-key", sharding_key),
                             properties=p.parse_properties(properties), delay_level=delay_level)
    except ValueError as exc:  # each check names the option it refuses
        raise ConfigError(str(exc)) from None


@click.command()
@namesrv_flag
@config_option("namesrv and topic")
@click.option("-t", "--topic", "topics", multiple=True, cls=Shown, shown="the config's topic", help="topic to send to")
@click.option("--count", type=click.IntRange(min=0), cls=Shown, shown="every line of the input",
              help="send N messages: the first N lines of --file or piped stdin, else N generated ones")
@click.option("--file", "file", type=click.File("rb"), cls=Shown, shown="stdin when it is a pipe or a file",
              help="send each line of FILE as a message ('-': stdin)")
@click.option("--body", default="message {i}", show_default=True, help="body template of generated messages")
@click.option("--tags", cls=Shown, shown="none", help="tag of every message")
@click.option("--keys", cls=Shown, shown="none", help="KEYS template, e.g. 'order-{i}'")
@click.option("--property", "properties", multiple=True, metavar="K=V", cls=Shown, shown="none",
              help="user property (repeatable)")
@click.option("--sharding-key", cls=Shown, shown="none: round robin over the queues",
              help="orderly send: messages with equal keys go to one queue, in order; template, e.g. 'user-{i%8}'")
@click.option("--delay-level", type=click.IntRange(0, 18), default=0, show_default=True,
              help="delay level (1=1s ... 18=2h; 0: none)")
@click.option("--concurrency", type=click.IntRange(1, 4096), default=64, show_default=True,
              help="sends in flight at once")
@click.option("--batch", type=click.IntRange(1, 1024), default=1, show_default=True,
              help="messages per request (SEND_BATCH_MESSAGE; not with --sharding-key or --delay-level)")
@click.option("--keep-order/--no-keep-order", "keep_order", default=None, cls=Shown,
              shown="on for --file and stdin, off for generated messages",
              help="each queue stores its share of the lines in input order (one send per queue in flight); "
                   "--no-keep-order sends --concurrency at once, in any order")
@click.option("--group", default="rmqrun_producer", show_default=True, help="producer group")
@click.option("--msg-trace", is_flag=True, help="write a Pub message-trace record per message (Java's enableMsgTrace; "
              "see docs/tracing.md)")
@click.option("--msg-trace-topic", default="RMQ_SYS_TRACE_TOPIC", show_default=True, help="the topic of --msg-trace")
@click.option("--otel", is_flag=True, help="OpenTelemetry: a send span per message, its W3C context in the message "
              "(exporters from OTEL_* variables; needs rmqrun[otel])")
@namespace_option
@security_options
def produce(namesrv: str | None, config_file: str | None, topics: tuple[str, ...], count: int | None, file: Any,
            body: str, tags: str | None, keys: str | None, properties: tuple[str, ...], sharding_key: str | None,
            delay_level: int, concurrency: int, batch: int, keep_order: bool | None, group: str, msg_trace: bool,
            msg_trace_topic: str, otel: bool, namespace: str | None, security_flags: dict[str, Any]) -> None:
    """Send messages: each line of --file or of piped stdin, or --count N generated ones."""
    from rmqrun.cli.produce import sender as p
    from rmqrun.client.producer import Producer
    given = _one_topic(topics)
    addr = resolve_namesrv(namesrv, config_file)
    security = security_for(security_flags, config_file)
    topic = _topic_of(given, config_file)
    namespace = resolve_namespace(namespace, config_file)
    if not body:
        raise ConfigError("--body '' is empty: RocketMQ refuses a message without a body; give some text "
                          "(the default is 'message {i}')")
    template = _template("--body", body)
    spec = _spec(topic, tags, keys, sharding_key, properties, delay_level)
    if batch > 1 and (sharding_key or delay_level):
        raise ConfigError("--batch cannot be combined with --sharding-key or --delay-level")
    if batch > 1 and msg_trace:
        raise ConfigError("--msg-trace traces messages sent one by one: drop --batch")
    if msg_trace:
        _check_trace_topic(msg_trace_topic)
    if otel:
        _start_otel()
    if file is None and _stdin_is_data():
        file = click.get_binary_stream("stdin")
    if file is None and count is None:
        raise ConfigError("nothing to send: give --count N, --file FILE, or pipe lines on stdin")
    ordered = (file is not None) if keep_order is None else keep_order
    logs.setup("ERROR", role="produce")
    show_bar = sys.stderr.isatty() and count is not None

    async def main() -> p.ProduceReport:
        bodies = p.generated(count or 0, template) if file is None else p.lines_of(file.readline, count)
        async with Producer(addr, group, namespace=namespace, security=security, msg_trace=msg_trace,
                            msg_trace_topic=msg_trace_topic, otel=otel or None) as producer:
            if not show_bar:
                return await p.produce(producer, spec, bodies, concurrency=concurrency, batch=batch,
                                       keep_order=ordered)
            with click.progressbar(length=count, label=f"sending to {topic}", file=sys.stderr,
                                   show_pos=True, show_eta=True) as bar:
                return await p.produce(producer, spec, bodies, concurrency=concurrency, batch=batch,
                                       keep_order=ordered, on_sent=bar.update)

    report = asyncio.run(main())
    click.echo(report.summary(topic))
    sys.exit(EXIT_RUNTIME if report.failed else EXIT_OK)
