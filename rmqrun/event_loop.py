"""Which asyncio event loop a long-running rmqrun process is driven by.

``rmqrun run`` (the supervisor: setting ``event_loop``) and the embedded broker
(``rmqrun broker --event-loop``, ``python -m rmqrun.broker --event-loop``) both
choose here. ``uvloop`` (libuv under asyncio's API, the optional
``rmqrun[uvloop]`` extra) makes the socket and callback work of the loop
cheaper; neither uses anything beyond the standard loop API (streams, readers
and writers on raw fds, signal handlers, timers, TLS transports), so it is a
drop-in. The choice:

* ``auto`` (default): uvloop when it is installed, else the standard loop;
* ``uvloop``: uvloop, and a clear error naming the setting when it is not installed;
* ``asyncio``: the standard loop, even with uvloop installed.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any, Callable, Coroutine, TypeVar

from rmqrun.errors import ConfigError

T = TypeVar("T")
CHOICES = ("auto", "uvloop", "asyncio")


def loop_factory(choice: str, setting: str = "event_loop") -> tuple[Callable[[], asyncio.AbstractEventLoop] | None,
                                                                   str]:
    """The loop factory for ``choice`` (None: asyncio's own) and the name of the loop it makes.

    A refusal names ``setting``, the name the operator gave the choice under (``--event-loop`` on the broker).
    """
    if choice not in CHOICES:
        raise ConfigError(f"{setting}={choice!r} is invalid: one of {', '.join(CHOICES)}")
    if choice == "asyncio":
        return None, "asyncio"
    try:
        import uvloop
    except ImportError:
        if choice == "uvloop":
            give = f"{setting} " if setting.startswith("-") else f"{setting}: "  # a flag, or a setting's key
            raise ConfigError(f"{setting}=uvloop but uvloop is not installed "
                              f"(pip install 'rmqrun[uvloop]', or {give}auto / asyncio)") from None
        return None, "asyncio"
    return uvloop.new_event_loop, f"uvloop {getattr(uvloop, '__version__', '')}".strip()


def run(main: Callable[[str], Coroutine[Any, Any, T]], choice: str, setting: str = "event_loop") -> T:
    """``asyncio.run(main(name))`` on the chosen loop, ``name`` saying which loop it is.

    ``main`` is called only once the loop is settled, so a refused choice leaves
    no coroutine un-awaited.
    """
    factory, name = loop_factory(choice, setting)
    if factory is None:
        return asyncio.run(main(name))
    if sys.version_info >= (3, 11):
        with asyncio.Runner(loop_factory=factory) as runner:
            return runner.run(main(name))
    loop = factory()  # Python 3.10: no Runner; the same steps by hand
    try:
        asyncio.set_event_loop(loop)
        return loop.run_until_complete(main(name))
    finally:
        try:
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            asyncio.set_event_loop(None)
            loop.close()
