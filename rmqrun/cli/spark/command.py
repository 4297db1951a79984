"""``rmqrun spark MODULE:FUNC --topic T``: run a handler over a topic's history on Spark (a backfill).

Options are checked here before anything is imported or contacted: a bad value
is one ``rmqrun: error:`` line naming the option and exit 2; a handler or
``--worker-init`` that does not load, exit 3; a name server that does not
answer, a missing topic, pyspark or Java missing, a failed Spark job: exit 1; Ctrl-C: 130.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from rmqrun.cli.exit_codes import EXIT_INTERRUPTED, fail
from rmqrun.cli.flags import Shown, config_option, namesrv_flag
from rmqrun.cli.handler_path import cwd_on_path
from rmqrun.cli.namespace_option import namespace_option, resolve_namespace
from rmqrun.cli.option_checks import from_config, int_option, namesrv_option, tags_option
from rmqrun.cli.security_options import security_for, security_options
from rmqrun.errors import ConfigError, RmqrunError
from rmqrun.spark.backfill import Bound



def parse_bound(text: str, option: str, topic: str, *, allow_latest: bool, allow_earliest: bool,
                allow_offset: bool) -> Bound:
    """``earliest`` / ``latest`` / an offset / a time (ISO-8601 or epoch ms) / a JSON map of the
    ``rocketmq`` source's form ``{"topic": {"broker:queueId": offset}}``."""
    raw = text.strip()
    if raw.startswith("{"):
        from rmqrun.spark.errors import OptionError
        from rmqrun.spark.offsets import check_batch_sentinels, parse_offset_spec
        try:
            spec = parse_offset_spec(raw, option, [topic], allow_timestamp=False)
            check_batch_sentinels(spec, option)
        except OptionError as exc:
            raise ConfigError(str(exc).replace(f"rocketmq source option {option}", option)) from None
        return Bound("json", spec=spec)
    from rmqrun.cli.read.format import parse_from
    allowed = [w for w, ok in (("earliest", allow_earliest), ("latest", allow_latest), ("an offset", allow_offset))
               if ok]
    what = (f"{option} {text!r} is not " + ", ".join(allowed) + ", a time (ISO-8601 like 2024-11-24T08:00:00Z, "
            "or epoch milliseconds) or a JSON map {\"TOPIC\": {\"BROKER:QUEUE\": OFFSET}}")
    try:
        at = parse_from(raw)
    except ValueError:
        raise ConfigError(what) from None
    if (at.kind == "latest" and not allow_latest) or (at.kind == "earliest" and not allow_earliest) or \
            (at.kind == "offset" and not allow_offset):
        raise ConfigError(what)
    return Bound(at.kind, at.value)


def _conf(pairs: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--conf {pair!r} is not KEY=VALUE (e.g. spark.executor.memory=2g)")
        out[key.strip()] = value
    return out


@click.command("spark")
@click.argument("handler", required=False)
@namesrv_flag
@click.option("-t", "--topic", cls=Shown, shown="none (needed)", help="topic to read")
@click.option("--tags", metavar="EXPR", cls=Shown, shown="* (every tag)", help="tag expression, e.g. 'TagA || TagB'")
@click.option("--from", "from_", default="earliest", show_default=True, metavar="WHERE",
              help="earliest, an offset (per queue), a time (ISO-8601 or epoch ms) or a JSON map "
                   "{\"TOPIC\": {\"BROKER:QUEUE\": OFFSET}}")
@click.option("--to", "to", default="latest", show_default=True, metavar="WHERE",
              help="latest (the queues' ends now), a time, or a JSON map; exclusive")
@click.option("--master", default="local[*]", show_default=True,
              help="Spark master URL (spark://host:port, local[N,F], ...); a local master that would run each task "
                   "once gets F=spark.task.maxFailures (4) attempts")
@click.option("-g", "--group", cls=Shown, shown="none: failures are only counted and logged",
              help="consumer group: failures go to %RETRY%<group> and the end offsets are committed to it at the "
                   "end, so `rmqrun run --group` continues from there")
@click.option("--worker-init", "worker_init", metavar="MODULE:FN", cls=Shown, shown="none",
              help="run once per Spark partition first")
@click.option("--failed-to", "failed_to", metavar="PATH", cls=Shown, shown="none",
              help="write failed messages here (Parquet if PATH ends in .parquet, else JSON Lines)")
@click.option("--batch-size", "batch_size", default="1", show_default=True, metavar="N",
              help="messages per call of an @rmqrun.batch handler")
@click.option("--time-limit", "time_limit", default="900", show_default=True, metavar="S",
              help="soft time limit of one handler call in seconds (0: none)")
@click.option("--partitions", metavar="N", cls=Shown, shown="3 x the default parallelism",
              help="at least N Spark partitions, queues split by offset range")
@click.option("--conf", "conf", multiple=True, metavar="KEY=VALUE", cls=Shown, shown="none",
              help="a Spark setting (repeatable)")
@config_option("the name server, topic, namespace, handler and ACL/TLS (never the group)")
@namespace_option
@security_options
def spark(handler: str | None, namesrv: str | None, topic: str | None, tags: str | None, from_: str, to: str,
          master: str, group: str | None, worker_init: str | None, failed_to: str | None, batch_size: str,
          time_limit: str, partitions: str | None, conf: tuple[str, ...], config_file: str | None,
          namespace: str | None, security_flags: dict[str, Any]) -> None:
    """Run HANDLER (module:function, as for `rmqrun run`) over every message of a topic's range on Spark."""
    from rmqrun.cli import logs
    from rmqrun.spark.runner import RunnerOptions, run
    from rmqrun.handler.loading import HandlerLoadError

    namesrv, topic, namespace = from_config(config_file, namesrv, topic, namespace)
    if handler is None and config_file:
        from rmqrun.cli import settings as table
        handler = table.resolve({}, config_file=config_file)["handler"]
    opts = RunnerOptions(
        handler=_required(handler, "the handler argument MODULE:FUNC"),
        namesrv=namesrv_option(namesrv), topic=_topic(topic), tags=tags_option(topic or "", tags),
        master=_nonempty(master, "--master"), group=_group(group), worker_init=worker_init,
        failed_to=failed_to, batch_size=int_option(batch_size, "--batch-size", 1),
        time_limit=_seconds(time_limit, "--time-limit"),
        partitions=int_option(partitions, "--partitions", 1) if partitions is not None else None, conf=_conf(conf),
        namespace=resolve_namespace(namespace))
    opts.security = security_for(security_flags, config_file)
    opts.start = parse_bound(from_, "--from", opts.topic, allow_latest=False, allow_earliest=True, allow_offset=True)
    opts.end = parse_bound(to, "--to", opts.topic, allow_latest=True, allow_earliest=False, allow_offset=False)
    cwd_on_path()
    logs.setup("ERROR", role="spark")
    try:
        code = run(opts)
    except HandlerLoadError as exc:
        fail(exc, str(exc))
    except ConfigError:
        raise
    except KeyboardInterrupt:
        click.echo("rmqrun: interrupted; nothing was committed", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except (RmqrunError, RuntimeError) as exc:
        # pyspark or Java missing, the name server silent, the topic missing, the Spark job failed
        fail(exc, str(exc))
    sys.exit(code)


def _required(value: str | None, what: str) -> str:
    if value is None or not value.strip():
        raise ConfigError(f"missing {what}")
    return value.strip()


def _nonempty(value: str, option: str) -> str:
    if not value.strip():
        raise ConfigError(f"{option} is empty")
    return value.strip()


def _topic(topic: str | None) -> str:
    value = _required(topic, "--topic")
    from rmqrun.client.producer import check_topic
    try:
        check_topic(value)
    except Exception as exc:
        raise ConfigError(f"--topic {value!r}: {exc}") from None
    return value


def _group(group: str | None) -> str | None:
    if group is None:
        return None
    value = group.strip()
    from rmqrun.namespace import MAX_GROUP_LENGTH
    if not value or not all(c.isalnum() or c in "%|_-" for c in value) or value.startswith("%") \
            or len(value) > MAX_GROUP_LENGTH:
        raise ConfigError(f"--group {group!r} is not a consumer group name (letters, digits, '_', '-', '|'; at "
                          f"most {MAX_GROUP_LENGTH})")
    return value


def _seconds(value: str, option: str) -> float:
    import math
    try:
        number = float(value.strip())
    except ValueError:
        raise ConfigError(f"{option} {value!r} is not a number of seconds") from None
    if not math.isfinite(number) or number < 0:
        raise ConfigError(f"{option} {value!r} must be >= 0 (0: no limit)")
    return number
