"""``rmqrun topic describe``: the route and every queue a consumer reads, marked where it is not written.

What is asked is :func:`rmqrun.admin.topic.describe_topic` (every queue below
max(read, write), each marked ``rw``, ``r-`` (read, no longer written: it
drains) or ``-w`` (written but not read)); this module prints it.
"""

from __future__ import annotations

import json
from typing import Any

import click

from rmqrun.cli.flags import json_option
from rmqrun.cli.topic.options import cluster_args, the_topic, topic_args, topic_name


def render(out: dict[str, Any]) -> str:
    lines = [f"topic {out['topic']}" + (f" (name server order conf {out['order_conf']})" if out["order_conf"] else "")]
    for b in out["brokers"]:
        lines.append(f"broker {b['broker']} ({b['address'] or 'no master'}): {b['read_queues']} read / "
                     f"{b['write_queues']} write queue(s), perm {b['perm']}, order "
                     f"{'-' if b['order'] is None else str(b['order']).lower()}")
        lines.append(f"  {'queue':>5}  {'access':<6}  {'min offset':>10}  {'max offset':>10}  last update")
        for q in b["queues"]:
            note = {"r-": "  (read, not written: drains)", "-w": "  (written, not read)"}.get(q["access"], "")
            lines.append(f"  {q['queue']:>5}  {q['access']:<6}  {q['min_offset']:>10}  {q['max_offset']:>10}  "
                         f"{q['last_update']}{note}")
    return "\n".join(lines)


@click.command()
@topic_args
@json_option()
@cluster_args
def describe(name: str | None, topic_flag: str | None, as_json: bool, config_file: str | None, namesrv: str | None,
             namespace: str | None, security_flags: dict[str, Any]) -> None:
    """Route, queue counts, permissions and, for every queue, access, min/max offset and last update time."""
    from rmqrun.admin.topic import describe_topic
    from rmqrun.cli.cluster import resolve_cluster, run_admin
    name = topic_name(the_topic(name, topic_flag), namespace, config_file)
    addr = resolve_cluster(namesrv, config_file, security_flags)
    out = run_admin(lambda: describe_topic(addr, name))
    click.echo(json.dumps(out) if as_json else render(out))
