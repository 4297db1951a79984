"""``rmqrun offsets reset``: the command, its options and what it prints; the work is :mod:`rmqrun.admin.offsets`.

The plan is printed first and nothing changes without ``--execute``, the
answer to an issue where ``--to 1714564800`` (seconds) was taken for a queue
offset and applied to every queue before anyone saw it. The plan's last
line says how many messages the group would consume again or skip, which is
what an operator wants to know before saying yes.
"""

from __future__ import annotations

import json
import time
from typing import Any

import click

from rmqrun.cli.flags import Shown, config_option, json_option, namesrv_flag
from rmqrun.cli.namespace_option import namespace_option
from rmqrun.cli.security_options import security_options
from rmqrun.errors import ConfigError

#: how the help marks the target options: the command needs exactly one
_ONE_TARGET = "one target required"


def _target_option(*decls: str, **kw: Any) -> Any:
    return click.option(*decls, cls=Shown, required_text=_ONE_TARGET, **kw)


@click.group()
def offsets() -> None:
    """Move a consumer group's offsets: the plan first, applied with --execute (kafka-consumer-groups
    --reset-offsets, mqadmin resetOffsetByTime)."""


@offsets.command(name="reset")
@click.option("-g", "--group", required=True, help="consumer group")
@click.option("-t", "--topic", required=True, help="topic whose queues are reset")
@_target_option("--to-earliest", is_flag=True, help="each queue's min offset: consume everything kept again")
@_target_option("--to-latest", is_flag=True, help="each queue's max offset: skip everything stored")
@_target_option("--to-datetime", metavar="ISO_TIME",
                help="the first message stored at or after this time, e.g. 2024-05-01T12:00:00Z (no zone: local)")
@_target_option("--to-timestamp-ms", type=click.IntRange(min=0), metavar="MS",
                help="the same, the time as epoch milliseconds")
@_target_option("--to-offset", type=click.IntRange(min=0), metavar="OFFSET",
                help="this queue offset on every queue, kept within each queue's [min, max]")
@_target_option("--shift-by", type=int, metavar="N",
                help="each queue's stored offset plus N (negative: back), kept within [min, max]; a queue never "
                     "committed is left alone")
@_target_option("--to", "to", metavar="WHERE",
                help="earliest | latest | an ISO time (a bare number is refused: offset, ms or seconds?)")
@click.option("--execute", is_flag=True, help="apply the plan; without it nothing changes")
@click.option("--dry-run", is_flag=True, help="print the plan only, which is also what happens without --execute")
@json_option()
@config_option("namesrv")
@namesrv_flag
@namespace_option
@security_options
def reset_cmd(group: str, topic: str, to_earliest: bool, to_latest: bool, to_datetime: str | None,
              to_timestamp_ms: int | None, to_offset: int | None, shift_by: int | None, to: str | None,
              execute: bool, dry_run: bool, as_json: bool, config_file: str | None, namesrv: str | None,
              namespace: str | None, security_flags: dict[str, Any]) -> None:
    """Print how GROUP's offsets on TOPIC would move; with --execute move them: online through the broker to
    running clients (by time only), else the stored offsets."""
    from rmqrun.cli.cluster import resolve_cluster, run_admin
    from rmqrun.cli.namespace_option import resolve_namespace
    from rmqrun.admin.offsets import reset
    from rmqrun.admin.offsets_target import choose_target
    from rmqrun.cli.settings import BY_KEY
    from rmqrun.namespace import unwrap_queue, wrap
    if execute and dry_run:
        raise ConfigError("give --execute or --dry-run, not both")
    group = BY_KEY["group"].convert(group, "command line --group")
    topic = BY_KEY["topic"].convert(topic, "command line --topic")
    target = choose_target(to=to, to_datetime=to_datetime, to_timestamp_ms=to_timestamp_ms, to_offset=to_offset,
                           shift_by=shift_by, to_earliest=to_earliest, to_latest=to_latest)
    addr = resolve_cluster(namesrv, config_file, security_flags)
    ns = resolve_namespace(namespace, config_file)
    out = run_admin(lambda: reset(addr, wrap(ns, group), wrap(ns, topic), target, execute))
    if ns:  # the plain names in what is printed; the namespace said once
        out = {**out, "group": group, "topic": topic, "namespace": ns}
        for r in out["rows"]:
            r.mq = unwrap_queue(ns, r.mq)
    click.echo(_json(out) if as_json else _text(out, group, topic, ns))


def _json(out: dict[str, Any]) -> str:
    rows = [{"topic": r.mq.topic, "broker": r.mq.broker_name, "queue": r.mq.queue_id, "old": r.old, "new": r.new,
             **({"note": r.note} if r.note else {})} for r in out["rows"]]
    return json.dumps({**out, "executed": not out["dry_run"], "rows": rows, "at": int(time.time() * 1000)})


def _text(out: dict[str, Any], group: str, topic: str, ns: str | None) -> str:
    clients = out["clients"]
    if out["path"] == "online":
        how = (f"online: through the broker to {_n(len(clients), 'running consumer')} of the group, which continue "
               "from the new offsets")
    else:
        how = "offline: no consumer of the group is online, the stored offsets are written"
    verb = "would reset" if out["dry_run"] else "reset"
    in_ns = f" in namespace {ns}" if ns else ""
    lines = [f"{verb} group {group} on {topic}{in_ns} to {out['to']} ({how})"]
    lines += [_row(r) for r in out["rows"]]
    lines += [f"warning: {w}" for w in out.get("warnings", ())]
    if out["dry_run"]:
        lines.append(f"dry run: nothing changed ({_effect(out['rows'])}); add --execute to apply this plan")
    return "\n".join(lines)


def _row(r: Any) -> str:
    old = "-" if r.old is None else r.old
    if r.new is None:
        return f"  {r.mq.broker_name}  queue {r.mq.queue_id}: {old} (never committed: left as it is)"
    return f"  {r.mq.broker_name}  queue {r.mq.queue_id}: {old} -> {r.new}" + (f"  (warning: {r.note})" if r.note
                                                                                else "")


def _effect(rows: list[Any]) -> str:
    """What the plan means for the group, in messages: consumed again (moving back) and skipped (forward)."""
    back = sum(r.old - r.new for r in rows if r.old is not None and r.new is not None and r.new < r.old)
    ahead = sum(r.new - r.old for r in rows if r.old is not None and r.new is not None and r.new > r.old)
    return f"{_n(back, 'message')} to consume again, {_n(ahead, 'message')} to skip"


def _n(count: int, noun: str) -> str:
    """``1 message``, ``2 messages``: the plural agrees with the count."""
    from rmqrun.supervisor.status_line import plural
    return plural(count, noun)
