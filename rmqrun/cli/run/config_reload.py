"""What ``rmqrun run`` reads on SIGHUP: the settings resolved anew, and which of them can change live.

The supervisor applies the answer (:mod:`rmqrun.supervisor.config_reload`);
this side knows the settings table. A HUP resolves the settings exactly as the
start did (the same flags, ``--config`` read again, the environment), builds
them (so a bad value is refused with its key, value and source, as at start)
and compares them with the running ones:

* :data:`LIVE`: what fresh workers take at their start (handler, hooks,
  recycling, limits, log level and format), the worker count, the grace
  period and the failure-log interval;
* everything else (group, topics, name server, consumer knobs, metrics port,
  security, ...) needs a restart: the line names it, the running consumer
  keeps the old value, and the next HUP names it again until the restart.

A process's environment is fixed when it starts: a changed ``Environment=``
of a systemd unit reaches rmqrun on a restart, not on a HUP; the config file
is what a HUP re-reads.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any, Callable, Mapping

from rmqrun.cli import logs
from rmqrun.cli import settings as table
from rmqrun.client.failure_log import set_report_every
from rmqrun.supervisor.config_reload import ConfigChange

__all__ = ["LIVE", "config_reader"]

#: the settings a HUP applies live; where each goes (its WorkerConfig or PoolConfig field) is its row's
LIVE: frozenset[str] = frozenset({
    "handler", "workers", "worker_init", "worker_exit", "max_messages_per_worker", "max_messages_jitter",
    "max_memory_per_worker", "max_log_record", "kill_grace", "crash_limit", "crash_window", "log_level",
    "log_format", "graceful_timeout", "log_repeat_interval",
})


def config_reader(cli: Mapping[str, Any], config_file: str | os.PathLike[str] | None,
                  running: table.Resolved) -> Callable[[], ConfigChange]:
    """A reader for :attr:`RunSettings.reload_config`: each call resolves the settings anew against the
    running ones (raises ConfigError for a file or value that does not load)."""
    state = {"running": running}

    def read() -> ConfigChange:
        current = state["running"]
        fresh = table.resolve(cli, config_file=config_file)
        built = table.build(fresh)
        changed = [s for s in table.SETTINGS if fresh.values[s.key] != current.values[s.key]]
        live = [s for s in changed if s.key in LIVE]
        pool = {s.field_name: getattr(built.pool, s.field_name) for s in live if s.target == table.POOL}
        if "workers" not in pool and "crash_limit" in pool:
            pool["workers"] = built.pool.workers
        # every live worker field as freshly built, changed or not: a default computed from another value
        # (max_messages_jitter, 10% of max_messages) follows it; the consumer's values there need a restart
        worker = {s.field_name: getattr(built.pool.worker, s.field_name) for s in table.SETTINGS
                  if s.key in LIVE and s.target == table.WORKER}
        keys = {s.key for s in live}

        def applied() -> None:
            # restart-only keys keep their running value, so the next HUP names them again
            values = {**current.values, **{k: fresh.values[k] for k in keys}}
            sources = {**current.sources, **{k: fresh.sources[k] for k in keys}}
            state["running"] = replace(current, values=values, sources=sources)
            if keys & {"log_level", "log_format"}:
                logs.setup(values["log_level"], values["log_format"], namespace=values["namespace"])
            if "log_repeat_interval" in keys:
                set_report_every(values["log_repeat_interval"])

        return ConfigChange(
            pool=pool, worker=worker, grace=built.grace if "graceful_timeout" in keys else None,
            applied=tuple(_change(s, current, fresh) for s in live),
            need_restart=tuple(_change(s, current, fresh) for s in changed if s.key not in LIVE),
            on_applied=applied)

    return read


def _change(setting: table.Setting, old: table.Resolved, new: table.Resolved) -> str:
    """``workers 2 -> 3 (config file c.yaml)``; a secret's values are never shown."""
    if setting.secret:
        return f"{setting.key} (changed; {new.sources[setting.key]})"
    return f"{setting.key} {_shown(old[setting.key])} -> {_shown(new[setting.key])} ({new.sources[setting.key]})"


def _shown(value: Any) -> str:
    return "(default)" if value is None else str(value)
