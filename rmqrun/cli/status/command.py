"""``rmqrun status``: the command and its ``--watch`` rounds; what a round asks is :mod:`rmqrun.admin.status`
(offsets and lag) and :mod:`rmqrun.admin.pop_status` (consume mode, POP clients' figures).

Each text round of ``--watch`` starts with a header line naming the local time it was taken (on a terminal the
screen is cleared first, so the table redraws in place); repeated tables with nothing saying when each was
taken could not be told apart in a log or a scrollback. JSON rounds carry their time in ``at``.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import click

from rmqrun.cli import logs
from rmqrun.cli.exit_codes import error_line, fail
from rmqrun.cli.flags import Shown, config_option, namesrv_flag
from rmqrun.cli.namespace_option import namespace_option, resolve_namespace
from rmqrun.cli.security_options import security_for, security_options
from rmqrun.errors import RmqrunError


@click.command()
@click.option("-g", "--group", cls=Shown, shown="the config's group", help="consumer group")
@click.option("-t", "--topic", "topics", multiple=True, cls=Shown, shown="the group's topics",
              help="only this topic (repeatable)")
@namesrv_flag
@config_option("namesrv and group")
@click.option("--json", "as_json", is_flag=True, help="one JSON object (with --watch: one per line)")
@click.option("--watch", is_flag=True, help="repeat every --interval seconds until Ctrl-C")
@click.option("--interval", type=click.FloatRange(min=0.1), default=2.0, show_default=True,
              help="seconds between rounds of --watch")
@namespace_option
@security_options
def status(group: str | None, topics: tuple[str, ...], namesrv: str | None, config_file: str | None,
           as_json: bool, watch: bool, interval: float, namespace: str | None,
           security_flags: dict[str, Any]) -> None:
    """Per queue: broker offset, consumer offset and lag of a consumer group.

    For a group consumed by POP also the topic's mode and each live client's un-acked count, acks, nacks
    and invisible-time extensions (docs/pop.md).

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
    security = security_for(security_flags, config_file)
    logs.setup("ERROR", role="status")
    group_name = resolved["group"]
    try:
        while True:
            _status_round(resolved["namesrv"], group_name, chosen, as_json, watch, namespace, security, interval)
            if not watch:
                return
            time.sleep(interval)
    except KeyboardInterrupt:  # the end of --watch, wherever Ctrl-C lands
        if not watch:
            raise


def _status_round(namesrv: str, group: str, topics: list[str], as_json: bool, watch: bool,
                  namespace: str | None = None, security: Any = None, interval: float = 2.0) -> None:
    """One table (or JSON line) of ``rmqrun status``; exit 1 on failure, except transient ones under --watch
    (a refusal, ACL or TLS, is not transient: it ends --watch too)."""
    import json

    from rmqrun.admin.pop_status import PopView, pop_view
    from rmqrun.admin.status import QueueProgress, UnknownGroupError, progress, to_json
    from rmqrun.cli.status.format import render, render_pop
    from rmqrun.remoting.errors import AccessDeniedError, TlsError

    async def ask() -> tuple[list[QueueProgress], PopView]:
        rows = await progress(namesrv, group, topics, security, namespace=namespace)
        # the POP part never fails the round: what the cluster does not say is shown as unknown
        return rows, await pop_view(namesrv, group, [r.mq.topic for r in rows], security, namespace=namespace)

    try:
        rows, pop = asyncio.run(ask())
    except (UnknownGroupError, AccessDeniedError, TlsError) as exc:
        fail(exc, str(exc))
    except (RmqrunError, OSError, asyncio.TimeoutError) as exc:
        if not watch:
            fail(exc)
        error_line(str(exc) or type(exc).__name__)
        return
    if as_json:
        click.echo(json.dumps({**to_json(rows, group, namespace), **pop.to_json()}))
        return
    if watch:
        if sys.stdout.isatty():
            click.clear()
        click.echo(watch_header(interval))
    click.echo(render(rows, group, namespace))
    if pop.shown:
        click.echo(render_pop(pop))


def watch_header(interval: float, now: float | None = None) -> str:
    """``2026-05-01 12:00:03 (every 2 s; Ctrl-C to stop)``: when this round of --watch was taken."""
    import time
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now))
    return f"{stamp} (every {interval:g} s; Ctrl-C to stop)"
