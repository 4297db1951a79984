"""Start-up waits for the cluster instead of giving up.

The Java consumer keeps retrying when no name server or broker answers at
start; a service manager restarting rmqrun every few seconds instead burns its
start limit (systemd's ``StartLimitBurst``) during an outage of a minute and
then leaves the service failed. So the supervisor starts its consumer in a
loop: each failed attempt is shut down cleanly, the next one comes after a
back-off that doubles up to a cap, the failure is logged at once and then at
most once per ``LOG_EVERY_S`` (not once per attempt), and every attempt is
reported as a ``STATUS=`` line for ``systemctl status``. READY=1 is sent by the
caller only once a consumer has started, i.e. after its first rebalance.

Signals keep working while it waits: TERM/INT end the wait (exit 0), the
others (HUP, TTIN, TTOU) are handed to the supervisor as usual.

A refusal is not an outage: an ACL refusal (wrong key, missing permission) or
a failed TLS handshake (untrusted or expired certificate) ends the wait at
once with that error, as waiting cannot fix it; the caller exits non-zero.
"""

from __future__ import annotations

import asyncio
import signal
import time
from dataclasses import dataclass
from typing import Awaitable, Callable

from loguru import logger

from rmqrun.aio import wait_for
from rmqrun.consumer.push import PushConsumer
from rmqrun.errors import ConfigError, RmqrunError
from rmqrun.remoting.errors import AccessDeniedError, TlsError

#: failures worth another attempt: the network, the name server, the brokers
RETRYABLE = (RmqrunError, OSError, asyncio.TimeoutError)
#: failures no attempt can fix: the cluster refuses these credentials or certificates
REFUSED = (AccessDeniedError, TlsError)


@dataclass(slots=True, frozen=True)
class Backoff:
    initial_s: float = 1.0
    cap_s: float = 10.0
    log_every_s: float = 30.0


async def start_when_reachable(make: Callable[[], PushConsumer], signals: "asyncio.Queue[int]", *,
                               on_status: Callable[[str], None] | None = None,
                               on_signal: Callable[[int], Awaitable[None]] | None = None,
                               backoff: Backoff = Backoff()) -> PushConsumer | None:
    """A started consumer, or None when TERM/INT arrived while waiting for the cluster.

    Raises :class:`ConfigError` (exit 2) and anything that is not a cluster
    failure (exit 1) at once: waiting cannot fix those.
    """
    attempt = 0
    delay = backoff.initial_s
    logged_at = float("-inf")
    first_failure = 0.0
    while True:
        attempt += 1
        engine = make()
        try:
            await engine.start()
            refusal = engine.instance.refusal
            if refusal is not None:  # a heartbeat or rebalance refused on the way: the start is no start
                raise refusal
        except (ConfigError, *REFUSED):
            await _discard(engine)
            raise
        except RETRYABLE as exc:
            refusal = engine.instance.refusal or _tls_cause(exc)
            if refusal is not None:
                await _discard(engine)
                raise refusal from exc
            await _discard(engine)
            error = f"{type(exc).__name__}: {exc}" if not str(exc) else str(exc)
        except Exception:
            await _discard(engine)
            raise
        else:
            if attempt > 1:
                logger.info("reached the cluster after {} attempts ({:.0f} s)", attempt,
                            time.monotonic() - first_failure)
            return engine
        now = time.monotonic()
        if attempt == 1:
            first_failure = now
        if now - logged_at >= backoff.log_every_s:
            logged_at = now
            logger.warning("cannot start consuming yet: {}; retrying with back-off up to {:g} s "
                           "(attempt {}, logged again in {:g} s if it persists)",
                           error, backoff.cap_s, attempt, backoff.log_every_s)
        if on_status is not None:
            on_status(f"waiting for the cluster: {error} (attempt {attempt}, next in {delay:g} s)")
        sig = await _next_signal(signals, delay)
        if sig in (signal.SIGTERM, signal.SIGINT):
            logger.info("{} received while waiting for the cluster: stopping", signal.Signals(sig).name)
            return None
        if sig is not None and on_signal is not None:
            await on_signal(sig)
        delay = min(backoff.cap_s, delay * 2)


def _tls_cause(exc: BaseException) -> TlsError | None:
    """A TLS failure behind a wrapped error (e.g. every name server failed the handshake)."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, TlsError):
            return cur
        seen.add(id(cur))
        cur = cur.__cause__ or cur.__context__
    return None


async def _next_signal(signals: "asyncio.Queue[int]", timeout: float) -> int | None:
    try:
        return await wait_for(signals.get(), timeout)
    except asyncio.TimeoutError:
        return None


async def _discard(engine: PushConsumer) -> None:
    """Close what a failed attempt opened (connections, periodic tasks)."""
    try:
        await engine.shutdown(0)
    except Exception as exc:  # the attempt failed already; its clean-up must not end the wait
        logger.debug("clean-up after a failed start: {!r}", exc)
