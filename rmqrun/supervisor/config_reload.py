"""SIGHUP with the configuration read anew: what the pool can take live, applied with the fresh workers.

gunicorn's HUP re-reads its configuration and starts fresh workers with it;
rmqrun's used to start fresh workers only, so ``workers: 3`` in the file and
``kill -HUP`` still gave 2, and a broken file went unnoticed until the next
restart failed. ``rmqrun run`` now hands the supervisor a reader
(:attr:`RunSettings.reload_config <rmqrun.supervisor.supervisor.RunSettings>`)
that resolves the settings again (file, environment, the same flags) and says
what changed; this module applies it:

* a configuration that does not load or validate is refused with one ERROR
  line naming the key and value; nothing is reloaded and the running workers
  and settings carry on (the next HUP tries again);
* the pool settings that reach a worker at its start (handler, hooks,
  recycling, limits, log level) go to the fresh workers, which take over only
  once all are ready, as before; if they do not boot, the old settings are put
  back with the old workers;
* then the worker count is made what the file says, the crash window and the
  grace period follow, and one line lists what changed; settings the running
  consumer cannot change (group, topics, name server, ...) are named in one
  WARNING line: they take effect on a restart.

The reader lives in the CLI (it knows the settings table); the supervisor
layer sees only :class:`ConfigChange`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable

from loguru import logger

from rmqrun.errors import ConfigError
from rmqrun.supervisor.pool import PoolError

#: the supervisor (its ``executor`` and ``settings``); not imported, it imports this module
Supervisor = Any

__all__ = ["ConfigChange", "reload_with_config"]


@dataclass(frozen=True)
class ConfigChange:
    """A HUP's fresh reading of the configuration, as far as it differs from the running one."""

    #: PoolConfig fields to change (the worker count, the crash guard's limits)
    pool: dict[str, Any] = field(default_factory=dict)
    #: WorkerConfig fields to change: what the fresh workers start with
    worker: dict[str, Any] = field(default_factory=dict)
    #: the new graceful stop budget (seconds), None when unchanged
    grace: float | None = None
    #: ``key old -> new`` of each setting applied live, for the log line
    applied: tuple[str, ...] = ()
    #: ``key old -> new`` of each changed setting that needs a restart
    need_restart: tuple[str, ...] = ()
    #: run once the change took effect (the supervisor's own log level); never when it was refused
    on_applied: Callable[[], None] | None = field(default=None, repr=False)


async def reload_with_config(supervisor: Supervisor, read: Callable[[], ConfigChange]) -> None:
    """HUP: read the configuration, start fresh workers with it, then apply the rest (see the module doc)."""
    try:
        change = read()
    except ConfigError as exc:
        logger.error("SIGHUP refused: {}; nothing reloaded, the running workers and settings carry on", exc)
        return
    executor = supervisor.executor
    pool = executor.pool
    old = pool.config
    try:
        new = dataclasses.replace(old, worker=dataclasses.replace(old.worker, **change.worker), **change.pool)
    except ConfigError as exc:  # a combination the pool refuses (its own checks)
        logger.error("SIGHUP refused: {}; nothing reloaded, the running workers and settings carry on", exc)
        return
    _set_pool_config(supervisor, new)
    try:
        await pool.reload()
    except (PoolError, OSError) as exc:
        _set_pool_config(supervisor, old)
        logger.error("SIGHUP failed: {}; the running workers carry on{}", exc,
                     " with the previous settings" if change.applied else "")
        return
    _resize(supervisor, new.workers)
    if change.grace is not None:
        supervisor.settings.grace = change.grace
    if change.on_applied is not None:
        change.on_applied()
    if change.applied:
        logger.info("SIGHUP: settings applied: {}", ", ".join(change.applied))
    if change.need_restart:
        logger.warning("SIGHUP: changed settings that need a restart (the running consumer keeps the old "
                       "values): {}", ", ".join(change.need_restart))


def _set_pool_config(supervisor: Supervisor, config: Any) -> None:
    """The pool settings fresh workers start with (the pool sends ``config.worker`` as it spawns), and the
    crash guard's limits; the pool has no setter of its own (pool.py is at the size limit)."""
    pool = supervisor.executor.pool
    pool.config = config
    guard = pool._crash_guard
    guard.limit, guard.window = config.effective_crash_limit, config.crash_window
    supervisor.executor.config = config
    supervisor.settings.pool = config


def _resize(supervisor: Supervisor, workers: int) -> None:
    """As many workers as the configuration says, one TTIN / TTOU at a time (their log lines included)."""
    pool = supervisor.executor.pool
    if pool.size == workers:
        return
    while pool.size < workers:
        pool.add_worker()
    while pool.size > workers:
        pool.remove_worker()
    supervisor.executor.resize()
