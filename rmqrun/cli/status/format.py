"""What ``rmqrun status`` prints: the offsets table (like ``mqadmin consumerProgress``) and the POP lines.

The figures come from :mod:`rmqrun.admin.status` (offsets and lag) and
:mod:`rmqrun.admin.pop_status` (consume mode, POP clients); this module only
turns them into text, so a program reading the same figures needs no click.
"""

from __future__ import annotations

import time
from typing import Sequence

from rmqrun.admin.pop_status import PopView, TopicMode
from rmqrun.admin.status import QueueProgress


#: ``rmqrun status`` adds the "oldest unfinished" column once a queue's oldest unfinished message is this old
STUCK_AFTER_S = 60.0


def _age_text(age: float | None) -> str:
    if age is None:
        return "-"
    if age < 120:
        return f"{age:.0f} s"
    if age < 7200:
        return f"{age / 60:.0f} min"
    return f"{age / 3600:.1f} h"


def _time_text(ms: int | None) -> str:
    """The store time of the last message consumed, as mqadmin's ``#LastTime`` (here in UTC); '-': none known."""
    if not ms:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ms / 1000))


def render(rows: Sequence[QueueProgress], group: str, namespace: str | None = None) -> str:
    """A table like mqadmin consumerProgress (its ``#LastTime`` as "consumed up to"), with totals."""
    if namespace:
        group = f"{group} (namespace {namespace})"
    if not rows:
        return f"group {group}: no topics found (give --topic, or has the group never consumed?)"
    header: tuple[str, ...] = ("topic", "broker", "queue", "broker offset", "consumer offset", "lag",
                               "consumed up to (UTC)")
    body: list[tuple[str, ...]] = [
        (r.mq.topic, r.mq.broker_name, str(r.mq.queue_id), str(r.broker_offset),
         "-" if r.consumer_offset is None else str(r.consumer_offset), "-" if r.lag is None else str(r.lag),
         _time_text(r.consumed_up_to_ms))
        for r in rows]
    total_lag = sum(r.lag or 0 for r in rows)
    total_high = sum(r.broker_offset for r in rows)
    total_committed = sum(r.consumer_offset or 0 for r in rows)
    body.append(("total", "", str(len(rows)), str(total_high), str(total_committed), str(total_lag), ""))
    if any(r.oldest_age_s is not None and r.oldest_age_s >= STUCK_AFTER_S for r in rows):
        # something waits at its consumer offset for long (a stuck key or queue): say since when
        header += ("oldest unfinished",)
        body = [row + (_age_text(r.oldest_age_s),) for row, r in zip(body, rows)] + [body[-1] + ("",)]
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]
    numeric = {2, 3, 4, 5, 7}

    def fmt(row: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if i in numeric else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths)))

    rule = "  ".join("-" * w for w in widths)
    lines = [f"group {group}", fmt(header), rule, *(fmt(row) for row in body[:-1]), rule, fmt(body[-1])]
    return "\n".join([*(line.rstrip() for line in lines), *_lost_lines(rows)])


def _lost_lines(rows: Sequence[QueueProgress]) -> list[str]:
    """Queues whose consumer offset is below the queue's min offset: what retention deleted unconsumed."""
    lost = [r for r in rows if r.deleted_unconsumed]
    if not lost:
        return []
    out = [f"! {len(lost)} queue(s) with the consumer offset below the queue's min offset: retention deleted "
           f"{sum(r.deleted_unconsumed for r in lost)} message(s) before the group consumed them (it continues at "
           "the min offset):"]
    out += [f"!   {r.mq.topic} {r.mq.broker_name} queue {r.mq.queue_id}: consumer offset {r.consumer_offset} < min "
            f"offset {r.min_offset} ({r.deleted_unconsumed} deleted)" for r in lost]
    return out


def _mode_line(t: TopicMode) -> str:
    if t.mode is None:
        return f"topic {t.topic}: consume mode unknown (a RocketMQ 4.x broker, or no master answered)"
    if t.mode != "POP":
        return f"topic {t.topic}: consume mode {t.mode}"
    share = "?" if t.pop_share_queue_num is None else str(t.pop_share_queue_num)
    hour = "unknown" if t.revived_last_hour is None else str(t.revived_last_hour)
    total = "unknown" if t.revived_total is None else str(t.revived_total)
    return (f"topic {t.topic}: consume mode POP, popShareQueueNum {share}, revived by the broker {total} "
            f"(last hour {hour})")


def render_pop(view: PopView) -> str:
    """The lines ``rmqrun status`` adds under its table when some topic is not PULL ("" when none is)."""
    if not view.shown:
        return ""
    lines = [_mode_line(t) for t in view.topics]
    if any(t.mode == "POP" for t in view.topics):
        if not view.clients:
            lines.append("POP clients: none online")
        header = ("client", "un-acked", "acks", "nacks", "extensions", "revived")
        keys = ("unacked", "acks", "nacks", "invisible_extensions", "revived")
        body = [(c.client_id, *(str(c.figures.get(k, "?")) if c.answered else "unknown" for k in keys))
                for c in view.clients]
        if body:
            widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
            fmt = lambda row: "  ".join(c.ljust(w) if i == 0 else c.rjust(w)  # noqa: E731
                                        for i, (c, w) in enumerate(zip(row, widths))).rstrip()
            lines += ["POP clients", fmt(header), "  ".join("-" * w for w in widths)]
            for c, row in zip(view.clients, body):
                lines.append(fmt(row))
                if c.mode:
                    lines.append(f"  consumes {c.mode}")
                lines += [f"  {a.mq.topic} {a.mq.broker_name} queue {a.mq.queue_id}: un-acked {a.wait_ack_count}"
                          + (" (dropped)" if a.dropped else "") for a in c.assignments]
    return "\n".join(lines)
