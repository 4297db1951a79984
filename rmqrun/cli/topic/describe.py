"""``rmqrun topic describe``: the route and every queue a consumer reads, marked where it is not written.

A broker's GET_TOPIC_STATS_INFO lists write queues only (Java iterates
``writeQueueNums``), so after ``topic update --write-queues 4`` of an 8-queue
topic the old listing stopped at queue 3 while queues 4-7 still held
messages being read. Every queue below max(read, write) is listed here; the
ones past the stats answer are asked for their min/max offsets one by one,
and each queue is marked ``rw``, ``r-`` (read, no longer written: it drains)
or ``-w`` (written but not read: its messages wait for a read-queue change).
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

import click

from rmqrun.cli.flags import json_option
from rmqrun.cli.topic_options import cluster_args, the_topic, topic_args, topic_name


def _iso(ms: int | None) -> str:
    if not ms or ms <= 0:
        return "-"
    return datetime.fromtimestamp(ms / 1000, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def access(queue_id: int, read_queues: int, write_queues: int, perm: int) -> str:
    """``rw``, ``r-``, ``-w`` or ``--``: whether consumers read the queue and producers write it."""
    from rmqrun.client.route import is_readable, is_writeable
    readable = queue_id < read_queues and is_readable(perm)
    writable = queue_id < write_queues and is_writeable(perm)
    return ("r" if readable else "-") + ("w" if writable else "-")


async def _queues(instance: Any, admin: Any, master: str, name: str, broker_name: str, read_queues: int,
                  write_queues: int, perm: int) -> list[dict[str, Any]]:
    """Every queue below max(read, write): the broker's stats, and min/max offsets for the ones it leaves out."""
    from rmqrun.model import MessageQueue
    stats = {mq.queue_id: s for mq, s in (await admin.topic_stats(master, name)).items()}
    rows = []
    for qid in range(max(read_queues, write_queues, max(stats, default=-1) + 1)):
        s = stats.get(qid)
        if s is not None:
            low, high, last = s.min_offset, s.max_offset, s.last_update_timestamp
        else:
            mq = MessageQueue(name, broker_name, qid)
            low = await instance.broker.get_min_offset(master, mq)
            high = await instance.broker.get_max_offset(master, mq)
            last = None
        rows.append({"queue": qid, "min_offset": low, "max_offset": high, "last_update": _iso(last),
                     "last_update_ms": last, "access": access(qid, read_queues, write_queues, perm),
                     "readable": qid < read_queues, "writable": qid < write_queues})
    return rows


async def describe_topic(cluster: Any, name: str) -> dict[str, Any]:
    from rmqrun.cli.admin_session import AdminError, admin_session
    from rmqrun.client.admin import ORDER_TOPIC_CONFIG
    from rmqrun.client.route import perm_to_string
    from rmqrun.remoting.errors import TopicNotExistError
    async with admin_session(cluster, "rmqrun-topic") as (instance, admin):
        try:
            route = await admin.namesrv.get_route(name)
        except TopicNotExistError:
            raise AdminError(f"topic {name!r} does not exist on the name server") from None
        brokers = []
        for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
            bd = next((b for b in route.broker_datas if b.broker_name == qd.broker_name), None)
            master = bd.master_address if bd else None
            queues: list[dict[str, Any]] = []
            order = None
            if master is not None:
                queues = await _queues(instance, admin, master, name, qd.broker_name, qd.read_queue_nums,
                                       qd.write_queue_nums, qd.perm)
                cfg = (await admin.topic_configs(master)).get(name)
                order = cfg.order if cfg else None
            brokers.append({"broker": qd.broker_name, "address": master, "read_queues": qd.read_queue_nums,
                            "write_queues": qd.write_queue_nums, "perm": perm_to_string(qd.perm),
                            "order": order, "queues": queues})
        order_conf = await admin.get_kv_config(ORDER_TOPIC_CONFIG, name)
        return {"topic": name, "order_conf": order_conf, "brokers": brokers}


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
    from rmqrun.cli.admin_session import resolve_cluster, run_admin
    name = topic_name(the_topic(name, topic_flag), namespace, config_file)
    addr = resolve_cluster(namesrv, config_file, security_flags)
    out = run_admin(lambda: describe_topic(addr, name))
    click.echo(json.dumps(out) if as_json else render(out))
