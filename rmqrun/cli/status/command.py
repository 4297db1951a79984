"""``rmqrun status``: the command and its ``--watch`` rounds; what a round asks is :mod:`rmqrun.admin.status`
(offsets and lag) and :mod:`rmqrun.admin.pop_status` (consume mode, POP clients' figures).

Each text round of ``--watch`` starts with a header line naming the local time it was taken (on a terminal the
screen is cleared first, so the table redraws in place); repeated tables with nothing saying when each was
taken could not be told apart in a log or a scrollback. JSON rounds carry their time in ``at``.
"""

from __future__ import annotations

import asyncio
import sys
from typing import TYPE_CHECKING, Any, NoReturn

import click

from rmqrun.aio import run_until_set, stop_on_signals, wait_event
from rmqrun.cli import logs
from rmqrun.cli.exit_codes import error_line, fail
from rmqrun.cli.flags import Shown, config_option, namesrv_flag
from rmqrun.cli.namespace_option import namespace_option, resolve_namespace
from rmqrun.cli.security_options import security_for, security_options
from rmqrun.errors import RmqrunError

if TYPE_CHECKING:
    from rmqrun.admin.pop_status import PopView
    from rmqrun.admin.status import QueueProgress


@click.command()
@click.option("-g", "--group", cls=Shown, shown="the config's group", help="consumer group")
@click.option("-t", "--topic", "topics", multiple=True, cls=Shown, shown="the group's topics",
              help="only this topic (repeatable)")
@namesrv_flag
@config_option("namesrv and group")
@click.option("--json", "as_json", is_flag=True, help="one JSON object (with --watch: one per line)")
@click.option("--watch", is_flag=True, help="repeat every --interval seconds until Ctrl-C (or SIGTERM): exit 0")
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
    if watch:
        asyncio.run(_watch(resolved["namesrv"], group_name, chosen, as_json, namespace, security, interval))
        return
    try:
        rows, pop = asyncio.run(_ask(resolved["namesrv"], group_name, chosen, namespace, security))
    except Exception as exc:
        _fatal(exc)
    _show(rows, pop, group_name, namespace, as_json)


async def _ask(namesrv: str, group: str, topics: list[str], namespace: str | None,
               security: Any) -> "tuple[list[QueueProgress], PopView]":
    """One round's answers from the cluster: the queues' progress and the POP view."""
    from rmqrun.admin.pop_status import pop_view
    from rmqrun.admin.status import progress

    rows = await progress(namesrv, group, topics, security, namespace=namespace)
    # the POP part never fails the round: what the cluster does not say is shown as unknown
    return rows, await pop_view(namesrv, group, [r.mq.topic for r in rows], security, namespace=namespace)


async def _watch(namesrv: str, group: str, topics: list[str], as_json: bool, namespace: str | None,
                 security: Any, interval: float) -> None:
    """``--watch``: a round every ``interval`` s until SIGINT or SIGTERM, which ends it at once (a round in
    flight is cancelled) with exit 0. The signals set an event of this loop: a Ctrl-C is never lost in a
    round's cancellation, nor raised as ``KeyboardInterrupt`` at some point of the shutdown."""
    with stop_on_signals() as stop:
        while not stop.is_set():
            answered = await run_until_set(stop, _ask(namesrv, group, topics, namespace, security))
            if answered.cancelled():
                return
            error = answered.exception()
            if error is not None:
                if not _transient(error):
                    _fatal(error)
                error_line(str(error) or type(error).__name__)  # the next round tries again
            else:
                rows, pop = answered.result()
                if not as_json:
                    if sys.stdout.isatty():
                        click.clear()
                    click.echo(watch_header(interval))
                _show(rows, pop, group, namespace, as_json)
            await wait_event(stop, interval)


def _transient(exc: BaseException) -> bool:
    """A failure the next --watch round may not meet: the cluster unreachable, a timeout. A refusal (ACL, TLS)
    or an unknown group is not: it ends the command with exit 1, under --watch too."""
    from rmqrun.admin.status import UnknownGroupError
    from rmqrun.remoting.errors import AccessDeniedError, TlsError

    return (isinstance(exc, (RmqrunError, OSError, asyncio.TimeoutError))
            and not isinstance(exc, (UnknownGroupError, AccessDeniedError, TlsError)))


def _fatal(exc: BaseException) -> NoReturn:
    """End the command for a failed round: exit 1 with the reason (a refusal's own text); an error that is not
    the cluster's (a bug) is raised as it is."""
    from rmqrun.admin.status import UnknownGroupError
    from rmqrun.remoting.errors import AccessDeniedError, TlsError

    if isinstance(exc, (UnknownGroupError, AccessDeniedError, TlsError)):
        fail(exc, str(exc))
    if not isinstance(exc, (RmqrunError, OSError, asyncio.TimeoutError)):
        raise exc
    fail(exc)


def _show(rows: "list[QueueProgress]", pop: "PopView", group: str, namespace: str | None, as_json: bool) -> None:
    """One round: a JSON line, or the table (and the POP table when there is something to show)."""
    import json

    from rmqrun.admin.status import to_json
    from rmqrun.cli.status.format import render, render_pop

    if as_json:
        click.echo(json.dumps({**to_json(rows, group, namespace), **pop.to_json()}))
        return
    click.echo(render(rows, group, namespace))
    if pop.shown:
        click.echo(render_pop(pop))


def watch_header(interval: float, now: float | None = None) -> str:
    """``2026-05-01 12:00:03 (every 2 s; Ctrl-C to stop)``: when this round of --watch was taken."""
    import time
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now))
    return f"{stamp} (every {interval:g} s; Ctrl-C to stop)"
