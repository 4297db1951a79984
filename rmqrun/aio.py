"""Small asyncio helpers shared by the layers.

:func:`cancel_and_wait` exists because, before Python 3.12, ``asyncio.wait_for``
can swallow a cancellation that lands just as the awaited thing completes
(CPython gh-86296): a task cancelled once may carry on. Stopping code cancels
until the tasks are really done.
"""

from __future__ import annotations

import asyncio
from typing import Any, Iterable


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
