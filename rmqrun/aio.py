"""Small asyncio helpers shared by the layers.

:func:`cancel_and_wait` exists because, before Python 3.12, ``asyncio.wait_for``
can swallow a cancellation that lands just as the awaited thing completes
(CPython gh-86296): a task cancelled once may carry on. Stopping code cancels
until the tasks are really done.

:func:`call_after_writes` and :func:`after_writes_done` are one idea: work put
two loop steps later, behind a connection's end-of-turn write of the requests
this step queued (the puller's hand-over of a pull, the POP service's lane
flush), and a wait that sees all such work through.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Iterable


async def cancel_and_wait(tasks: Iterable[asyncio.Future[Any]], *, retry_every: float = 0.5) -> None:
    """Cancel ``tasks`` and wait until every one has finished, cancelling again if one goes on."""
    pending = {t for t in tasks if not t.done()}
    while pending:
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=retry_every)
    for task in tasks:
        if task.done() and not task.cancelled():
            task.exception()  # retrieved, so asyncio does not log it again at exit


def call_after_writes(callback: Callable[..., object], *args: Any) -> None:
    """Run ``callback(*args)`` two loop steps from now: after the callbacks this step scheduled, among them a
    connection's end-of-turn write of the frames queued in it (``Connection._queue``), so the requests this step
    made are on the wire before ``callback`` runs. Callbacks scheduled so run in the order they were."""
    loop = asyncio.get_running_loop()
    loop.call_soon(loop.call_soon, callback, *args)


async def after_writes_done() -> None:
    """Return once every callback that :func:`call_after_writes` scheduled before this call has run (two steps
    of the caller: callbacks run in the order they were scheduled)."""
    for _ in range(2):
        await asyncio.sleep(0)
