"""``rmqrun trace MSGID``: what happened to one message, from the message-trace topic.

What ``mqadmin queryMsgTraceById`` does: a QUERY_MESSAGE by the message id on the trace topic (every trace
message's KEYS hold the ids of the messages it traces), each found body decoded as Java's
``TraceDataEncoder`` reads it, and the records of that id kept. The Pub record says who sent it and when;
each delivery to a consumer group is a SubBefore (with its retry count) and a SubAfter (with the handler's
cost and verdict) sharing a request id. Written by any client with message tracing on: Java's
``enableMsgTrace``, ``rmqrun run --msg-trace``, ``rmqrun produce --msg-trace``, ``Producer(msg_trace=True)``.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

import click

from rmqrun.cli.cluster import resolve_namesrv
from rmqrun.cli.exit_codes import EXIT_OK, EXIT_RUNTIME
from rmqrun.cli.flags import config_option, namesrv_flag
from rmqrun.cli.security_options import security_for, security_options
from rmqrun.protocol.trace import ContextCode, DEFAULT_TRACE_TOPIC, TraceContext, TraceType, decode_trace_data


def _when(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000)) + f".{ms % 1000:03d}"


def _code(ctx: TraceContext) -> str:
    try:
        return ContextCode(ctx.context_code).name
    except ValueError:
        return str(ctx.context_code)


def row(ctx: TraceContext, client_host: str) -> dict[str, Any]:
    """One record as the table and ``--json`` show it."""
    bean = ctx.beans[0]
    out: dict[str, Any] = {"type": ctx.trace_type.value, "group": ctx.group, "client_host": client_host,
                           "time": _when(ctx.timestamp) if ctx.timestamp else "", "timestamp": ctx.timestamp}
    if ctx.trace_type is TraceType.PUB:
        out.update(topic=bean.topic, tags=bean.tags, keys=bean.keys, store_host=bean.store_host,
                   cost_ms=ctx.cost_time, status="success" if ctx.success else "failed",
                   offset_msg_id=bean.offset_msg_id)
    elif ctx.trace_type is TraceType.SUB_BEFORE:
        out.update(request_id=ctx.request_id, retry_times=bean.retry_times, keys=bean.keys)
    else:
        out.update(request_id=ctx.request_id, cost_ms=ctx.cost_time, status="success" if ctx.success else "failed",
                   result=_code(ctx), keys=bean.keys)
    return out


async def find_traces(namesrv: str, msg_id: str, topic: str, security: Any) -> list[dict[str, Any]]:
    """Every trace record of ``msg_id`` in ``topic``, oldest first."""
    from rmqrun.pull import AsyncPullConsumer
    async with AsyncPullConsumer(namesrv, "rmqrun_trace_reader", security=security, register=False) as c:
        found = await c.query_message(topic, msg_id, max_num=64)
    rows = []
    for m in found.messages:
        try:
            contexts = decode_trace_data(m.body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            click.echo(f"skipping a trace message ({m.msg_id}) that does not decode: {exc}", err=True)
            continue
        rows += [row(ctx, m.born_host) for ctx in contexts if ctx.beans and ctx.beans[0].msg_id == msg_id]
    # a SubAfter's time is when it was written: it sorts after its SubBefore
    rows.sort(key=lambda r: (r["timestamp"], r["type"] != "Pub"))
    return rows


_COLUMNS = ("type", "group", "client_host", "time", "retry_times", "cost_ms", "status", "result")


def _table(rows: list[dict[str, Any]]) -> str:
    shown = [[str(r.get(c, "")) for c in _COLUMNS] for r in rows]
    widths = [max(len(c), *(len(s[i]) for s in shown)) for i, c in enumerate(_COLUMNS)]
    lines = ["  ".join(c.upper().ljust(w) for c, w in zip(_COLUMNS, widths)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(s, widths)).rstrip() for s in shown]
    return "\n".join(lines)


@click.command("trace")
@click.argument("msg_id")
@namesrv_flag
@config_option("namesrv")
@click.option("--trace-topic", default=DEFAULT_TRACE_TOPIC, show_default=True,
              help="the trace topic the clients write to (their msg_trace_topic / customizedTraceTopic)")
@click.option("--json", "as_json", is_flag=True, help="one JSON object per record instead of the table")
@security_options
def trace(msg_id: str, namesrv: str | None, config_file: str | None, trace_topic: str, as_json: bool,
          security_flags: dict[str, Any]) -> None:
    """Show a message's trace: who sent it, and each delivery to each consumer group (mqadmin queryMsgTraceById)."""
    addr = resolve_namesrv(namesrv, config_file)
    security = security_for(security_flags, config_file)
    rows = asyncio.run(find_traces(addr, msg_id.strip(), trace_topic, security))
    if not rows:
        click.echo(f"no trace of message {msg_id} in {trace_topic} (was it sent or consumed with message tracing "
                   f"on? see docs/tracing.md)", err=True)
        sys.exit(EXIT_RUNTIME)
    if as_json:
        for r in rows:
            click.echo(json.dumps(r, ensure_ascii=False))
    else:
        click.echo(_table(rows))
    sys.exit(EXIT_OK)
