"""systemd ``Type=notify`` support with no dependency: the sd_notify datagram protocol.

When systemd starts a ``Type=notify`` service it sets ``NOTIFY_SOCKET``; the
service sends ``READY=1`` once it is really serving, ``STATUS=...`` lines
that ``systemctl status`` shows, ``WATCHDOG=1`` at least every
``WATCHDOG_USEC`` when ``WatchdogSec=`` is set, and ``STOPPING=1`` when it
begins to shut down. Without ``NOTIFY_SOCKET`` everything here is a no-op.

Watchdog pings come from a task on the supervisor's event loop: if the loop
ever stalls, pings stop and systemd restarts the service, which is the point.
A turning loop proves little on its own (it kept pinging while every worker
was stuck in a handler), so with ``watchdog_checks_health`` (the default) the
pings also stop while the supervisor is not alive (a wedged pool, see
:mod:`rmqrun.supervisor.health`), and resume if it recovers before systemd
acts.
"""

from __future__ import annotations

import asyncio
import os
import socket
from typing import TYPE_CHECKING

from loguru import logger

if TYPE_CHECKING:
    from rmqrun.supervisor.supervisor import RunSettings, Supervisor


class SystemdNotifier:
    def __init__(self, address: str | None, watchdog_usec: int = 0) -> None:
        self.address = address
        self.watchdog_interval = watchdog_usec / 1e6 / 2 if watchdog_usec > 0 else 0.0
        self._sock: socket.socket | None = None
        self._watchdog: asyncio.Task[None] | None = None

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> "SystemdNotifier":
        env = os.environ if environ is None else environ
        address = env.get("NOTIFY_SOCKET") or None
        usec = 0
        pid = env.get("WATCHDOG_PID")
        if env.get("WATCHDOG_USEC") and (not pid or pid == str(os.getpid())):
            try:
                usec = int(env["WATCHDOG_USEC"])
            except ValueError:
                logger.warning("ignoring WATCHDOG_USEC={!r}: not a number", env["WATCHDOG_USEC"])
        return cls(address, usec)

    @property
    def enabled(self) -> bool:
        return self.address is not None

    def notify(self, *lines: str) -> bool:
        """Send ``KEY=value`` lines; False (and a debug log) when there is nowhere to send."""
        if self.address is None:
            return False
        addr = self.address
        if addr.startswith("@"):
            addr = "\0" + addr[1:]  # abstract namespace
        try:
            if self._sock is None:
                # non-blocking: a manager that does not read (its queue holds a few datagrams) must cost a
                # lost STATUS line, never a frozen event loop (every probe, pull and commit runs on it)
                self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
                self._sock.setblocking(False)
            self._sock.sendto("\n".join(lines).encode("utf-8"), addr)
            return True
        except OSError as exc:  # BlockingIOError included: the queue is full
            logger.debug("sd_notify to {} failed: {}", self.address, exc)
            return False

    def attach(self, settings: "RunSettings", supervisor: "Supervisor") -> None:
        """Hook READY / STATUS / STOPPING / WATCHDOG into a supervisor's lifecycle."""
        if not self.enabled:
            return
        from rmqrun.supervisor.status_line import plural
        pool = settings.pool
        self.notify(f"STATUS=starting: {plural(pool.workers, 'worker')} running {pool.worker.handler}")

        def ready() -> None:
            self.notify("READY=1", f"STATUS=consuming: {supervisor.status_text()}", f"MAINPID={os.getpid()}")
            if self.watchdog_interval > 0:
                self._watchdog = asyncio.ensure_future(
                    self._ping(supervisor if settings.watchdog_checks_health else None))

        settings.on_ready = ready
        def status(text: str) -> None:
            # while the pool is wedged every STATUS= says so first: the watchdog's one STATUS=unhealthy line was
            # replaced by the next progress line 0.1 s later, and systemctl status hid the wedge
            alive = supervisor.liveness() if supervisor.phase == "consuming" else None  # judged only then
            self.notify(f"STATUS={text}" if alive is None or alive.ok else f"STATUS={alive.reason}; {text}")

        settings.on_status = status
        settings.on_stopping = lambda: self.notify("STOPPING=1", "STATUS=stopping: finishing in-flight messages")
        if settings.status_interval <= 0 or settings.status_interval > 10:
            settings.status_interval = 10.0

    async def _ping(self, supervisor: "Supervisor | None") -> None:
        """WATCHDOG=1 every half period, held back while ``supervisor`` (when given) is not alive."""
        held = False
        while True:
            verdict = supervisor.liveness() if supervisor is not None else None
            if verdict is None or verdict.ok:
                if held:
                    held = False
                    logger.info("systemd watchdog pings resume: {}", verdict.reason if verdict else "alive")
                self.notify("WATCHDOG=1")
            elif not held:
                held = True
                logger.error("systemd watchdog pings stop ({}): systemd restarts rmqrun once WatchdogSec passes",
                             verdict.reason)
                self.notify(f"STATUS={verdict.reason}")
            await asyncio.sleep(self.watchdog_interval)

    def stop(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None
