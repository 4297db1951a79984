"""``rmqrun dlq list|show|redrive --group G``: the dead letters of a consumer group.

``list`` prints what ``%DLQ%<group>`` holds (when each message was
dead-lettered, its ids and keys, the topic it came from, how often it was
tried, its size, and whether the re-drive group is past it); ``show`` one
message in full, by message id or by DLQ offset; ``redrive`` sends messages
back to their original topic (or ``--to-topic``), each once: the re-drive
group's offsets are committed as it goes (:mod:`rmqrun.pull.redrive`), so a
second run moves none. ``--dry-run`` prints the plan and changes nothing.

Filters (``--since``, ``--until``, ``--key``, ``--msg-id``) narrow all three.
Reading never commits anything but the re-drive's own offsets. Bad options
exit 2, a cluster that cannot answer or refuses (or a DLQ that is not
readable) exits 1 with one line.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Callable

import click

from rmqrun.cli.cluster import resolve_cluster, run_admin
from rmqrun.cli.flags import Shown, config_option, namesrv_flag
from rmqrun.cli.namespace_option import namespace_option, resolve_namespace
from rmqrun.cli.option_checks import int_option
from rmqrun.cli.read.format import parse_from
from rmqrun.cli.security_options import security_options
from rmqrun.errors import ConfigError

if TYPE_CHECKING:
    from rmqrun.admin.dlq import DlqTarget
    from rmqrun.pull.dead_letters import DlqFilter, QueueBounds
    from rmqrun.pull.redrive import RedriveReport


def _target(group: str | None, redrive_group: str | None, namesrv: str | None, config_file: str | None,
            namespace: str | None, security_flags: dict[str, Any]) -> "DlqTarget":
    from rmqrun.admin.dlq import DlqTarget
    from rmqrun.pull.redrive import redrive_group as default_redrive_group
    if group is None or not group.strip():
        raise ConfigError("missing --group (the consumer group whose %DLQ%<group> to read)")
    from rmqrun.cli.settings import BY_KEY
    name = BY_KEY["group"].convert(group.strip(), "command line --group")
    redrive = (redrive_group or "").strip()
    redrive = BY_KEY["group"].convert(redrive, "command line --redrive-group") if redrive \
        else default_redrive_group(name)
    cluster = resolve_cluster(namesrv, config_file, security_flags)
    return DlqTarget(cluster.namesrv, name, redrive, cluster.security, resolve_namespace(namespace, config_file))


def _time(value: str | None, option: str) -> int | None:
    if value is None:
        return None
    try:
        when = parse_from(value)
    except ValueError:
        when = None
    if when is None or when.kind != "time":
        raise ConfigError(f"{option} {value!r} is not a time: ISO-8601 (2024-11-24T08:00:00Z) or epoch milliseconds")
    return when.value


def _filter(since: str | None, until: str | None, keys: tuple[str, ...], msg_ids: tuple[str, ...],
            topics: tuple[str, ...] = (), namespace: str | None = None) -> "DlqFilter":
    from rmqrun.namespace import wrap
    from rmqrun.pull.dead_letters import DlqFilter
    selected = DlqFilter(_time(since, "--since"), _time(until, "--until"),
                         frozenset(k.strip() for k in keys if k.strip()),
                         frozenset(i.strip() for i in msg_ids if i.strip()),
                         frozenset(wrap(namespace, t.strip()) for t in topics if t.strip()))
    if selected.since_ms is not None and selected.until_ms is not None and selected.since_ms > selected.until_ms:
        raise ConfigError(f"--since {since!r} is after --until {until!r}")
    return selected


def _where(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The options every dlq command shares: the group, the cluster, the namespace, ACL/TLS."""
    fn = security_options(fn)
    fn = namespace_option(fn)
    fn = namesrv_flag(fn)
    fn = config_option("namesrv (and ACL/TLS, namespace)")(fn)
    fn = click.option("--redrive-group", metavar="GROUP", cls=Shown, shown="<group>-redrive",
                      help="the group holding the re-drive offsets")(fn)
    return click.option("-g", "--group", metavar="GROUP", cls=Shown, required_text="required",
                        help="the consumer group whose %DLQ%<group> to read")(fn)


def _filters(fn: Callable[..., Any]) -> Callable[..., Any]:
    fn = click.option("--topic", "topics", multiple=True, metavar="TOPIC", cls=Shown, shown="every topic",
                      help="only messages consumed from this topic; repeatable")(fn)
    fn = click.option("--msg-id", "msg_ids", multiple=True, metavar="ID", cls=Shown, shown="every message",
                      help="only this message (client id, broker id or original id); repeatable")(fn)
    fn = click.option("--key", "keys", multiple=True, metavar="KEY", cls=Shown, shown="every key",
                      help="only messages with this key; repeatable")(fn)
    fn = click.option("--until", metavar="TIME", cls=Shown, shown="no end",
                      help="only messages dead-lettered at or before TIME")(fn)
    return click.option("--since", metavar="TIME", cls=Shown, shown="the first",
                        help="only messages dead-lettered at or after TIME (ISO-8601 or epoch ms)")(fn)


def _note(text: str) -> None:
    click.echo(f"rmqrun dlq: {text}", err=True)


def _emit(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


@click.group()
def dlq() -> None:
    """The dead letters of a consumer group (%DLQ%<group>): list, show, re-drive."""


# ------------------------------------------------------------------------------------------- list

@dlq.command(name="list")
@_where
@_filters
@click.option("--count", metavar="N", cls=Shown, shown="all", help="stop after N messages")
@click.option("--json", "as_json", is_flag=True, help="one JSON object per message")
def list_(group: str | None, redrive_group: str | None, config_file: str | None, namesrv: str | None,
          namespace: str | None, security_flags: dict[str, Any], since: str | None, until: str | None,
          keys: tuple[str, ...], msg_ids: tuple[str, ...], topics: tuple[str, ...], count: str | None,
          as_json: bool) -> None:
    """The messages in the DLQ, oldest offset first, with whether they were re-driven."""
    from rmqrun.cli.dlq import format as fmt
    target = _target(group, redrive_group, namesrv, config_file, namespace, security_flags)
    selected = _filter(since, until, keys, msg_ids, topics, target.namespace)
    limit = None if count is None else int_option(count, "--count", 1)

    async def main() -> tuple[int, list[QueueBounds]]:
        shown = 0
        queues: list[QueueBounds] = []
        async for dead in list_dead_letters(target, selected, limit, queues):
            if isinstance(dead.item, UndecodableRecord):
                record = fmt.undecodable_record(dead.item, dead.redriven_to)
                _emit(fmt.as_json(record) if as_json else fmt.undecodable_line(record))
            else:
                record = fmt.summary(dead.item, target.namespace, dead.redriven_to)
                _emit(fmt.as_json(record) if as_json else fmt.list_line(record))
            shown += 1
        return shown, queues

    from rmqrun.admin.dlq import list_dead_letters
    from rmqrun.pull.dead_letters import UndecodableRecord
    shown, queues = run_admin(main)
    notes = [_queue_note(bounds, target.redrive_group) for bounds in queues]
    for note in notes:
        _note(note)
    _note(f"{shown} message(s) of %DLQ%{target.group}" + ("" if notes else " (the group has no DLQ)"))


def _queue_note(bounds: "QueueBounds", redrive_group: str) -> str:
    """``broker:queue holds offsets a..b, re-driven by G up to n``: one DLQ queue, on stderr after ``list``."""
    mq = bounds.mq
    held = (f"holds offsets {bounds.low}..{bounds.high - 1}" if bounds.high > bounds.low
            else f"is empty (offset {bounds.high})")
    return (f"{mq.broker_name}:{mq.queue_id} {held}, re-driven by {redrive_group} up to "
            f"{bounds.redriven_to if bounds.redriven_to >= 0 else 'none'}")


# ------------------------------------------------------------------------------------------- show

@dlq.command()
@_where
@click.option("--msg-id", metavar="ID", cls=Shown, required_text="required: this or --offset",
              help="the message: client id, broker (offset) id or original id")
@click.option("--offset", metavar="N", cls=Shown, required_text="required: this or --msg-id",
              help="the message at this DLQ queue offset")
@click.option("--queue", metavar="ID", default="0", show_default=True, help="with --offset: the DLQ queue id")
@click.option("--broker", metavar="NAME", cls=Shown, shown="the only one", help="with --offset: the broker")
@click.option("--body-chars", metavar="N", default="1024", show_default=True, help="body preview length")
@click.option("--json", "as_json", is_flag=True, help="one JSON object with every field")
def show(group: str | None, redrive_group: str | None, config_file: str | None, namesrv: str | None,
         namespace: str | None, security_flags: dict[str, Any], msg_id: str | None, offset: str | None,
         queue: str, broker: str | None, body_chars: str, as_json: bool) -> None:
    """One dead letter in full: ids, times, properties and the start of its body."""
    from rmqrun.cli.dlq import format as fmt
    target = _target(group, redrive_group, namesrv, config_file, namespace, security_flags)
    if (msg_id is None) == (offset is None):
        raise ConfigError("give exactly one of --msg-id and --offset")
    at = None if offset is None else int_option(offset, "--offset", 0)
    queue_id = int_option(queue, "--queue", 0)
    chars = int_option(body_chars, "--body-chars", 1)

    from rmqrun.admin.dlq import find_dead_letter
    found = run_admin(lambda: find_dead_letter(target, msg_id=msg_id, offset=at, queue_id=queue_id, broker=broker))
    if found is None:
        from rmqrun.cli.exit_codes import EXIT_RUNTIME, error_line
        error_line(f"no such message in %DLQ%{target.group}: " + (f"id {msg_id}" if msg_id else f"offset {at}"))
        sys.exit(EXIT_RUNTIME)
    from rmqrun.pull.dead_letters import UndecodableRecord
    if isinstance(found, UndecodableRecord):
        record = fmt.undecodable_record(found, -1)
        _emit(fmt.as_json(record) if as_json else fmt.undecodable_line(record))
        return
    _emit(fmt.show_json(found, target.namespace) if as_json else fmt.show_text(found, target.namespace, chars))


# ------------------------------------------------------------------------------------------- redrive

@dlq.command()
@_where
@_filters
@click.option("--to-topic", metavar="TOPIC", cls=Shown, shown="each message's original topic",
              help="send every message here instead of its original topic")
@click.option("--dry-run", is_flag=True, help="print what would be moved; send and commit nothing")
@click.option("--count", metavar="N", cls=Shown, shown="all", help="move at most N messages")
@click.option("--json", "as_json", is_flag=True, help="one JSON object per message moved")
def redrive(group: str | None, redrive_group: str | None, config_file: str | None, namesrv: str | None,
            namespace: str | None, security_flags: dict[str, Any], since: str | None, until: str | None,
            keys: tuple[str, ...], msg_ids: tuple[str, ...], topics: tuple[str, ...], to_topic: str | None,
            dry_run: bool, count: str | None, as_json: bool) -> None:
    """Send dead letters back to their topic, each once (the re-drive group's offsets say how far)."""
    target = _target(group, redrive_group, namesrv, config_file, namespace, security_flags)
    selected = _filter(since, until, keys, msg_ids, topics, target.namespace)
    limit = None if count is None else int_option(count, "--count", 1)
    if to_topic is not None:
        from rmqrun.client.producer import check_topic
        try:
            check_topic(to_topic.strip())
        except ValueError as exc:
            raise ConfigError(f"--to-topic: {exc}") from None
    report = run_admin(lambda: _redrive_main(target, selected, to_topic and to_topic.strip(), dry_run, limit,
                                             as_json))
    verb = "would move" if dry_run else "moved"
    _note(f"{verb} {len(report.moved)} message(s) of %DLQ%{target.group}; passed over {report.passed_over} the "
          f"filter left out; {report.undecodable} undecodable left in the DLQ")
    for bounds, position in report.queues:
        mq = bounds.mq
        done = "would be" if dry_run else "is now"
        _note(f"{mq.broker_name}:{mq.queue_id}: {target.redrive_group}'s offset {done} {position} "
              f"(was {bounds.redriven_to if bounds.redriven_to >= 0 else 'none'}; the DLQ ends at {bounds.high})")
    if dry_run:
        _note("dry run: nothing was sent and no offset was committed")


async def _redrive_main(target: "DlqTarget", selected: "DlqFilter", to_topic: str | None, dry_run: bool,
                        limit: int | None, as_json: bool) -> "RedriveReport":
    from rmqrun.admin.dlq import redrive as redrive_dead_letters
    from rmqrun.cli.dlq import format as fmt
    from rmqrun.pull.redrive import Moved

    def on_moved(moved: Moved) -> None:
        msg = moved.message
        if as_json:
            record = fmt.summary(msg, target.namespace, -1)
            del record["redriven"]
            record.update(to_topic=moved.target, new_offset_msg_id=moved.new_msg_id, dry_run=dry_run)
            _emit(fmt.as_json(record))
            return
        keys = ",".join(msg.properties.get("KEYS", "").split()) or "-"
        _emit(f"{'would move' if dry_run else 'moved'} {msg.broker_name}:{msg.queue_id}@{msg.queue_offset} "
              f"id={msg.msg_id} keys={keys} -> {moved.target}"
              + (f" (new offset id {moved.new_msg_id})" if moved.new_msg_id else ""))

    return await redrive_dead_letters(target, selected, to_topic=to_topic, dry_run=dry_run, limit=limit,
                                      on_moved=on_moved)
