"""What a HUP reads: the settings resolved anew, split into what the pool and each fresh worker take.

``rmqrun run``'s reader (``rmqrun/cli/run/config_reload.py``) builds the settings again and hands the supervisor
the WorkerConfig fields and PoolConfig fields of the live settings; the workers' namespace and group, the
consumer's, stay as they run. The supervisor's side is tested with real signals in
``tests/integration/test_signals_config_reload.py``.
"""

from __future__ import annotations

import os
from pathlib import Path

from rmqrun.cli import settings as table
from rmqrun.cli.run.config_reload import config_reader

CLI = {"handler": "workers.noop:handle", "namesrv": "127.0.0.1:9876", "group": "G", "topic": "T"}


def no_settings_in_env(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The reader resolves against the process environment, as ``rmqrun run`` does: none of ours in it."""
    for name in list(os.environ):
        if name.startswith("RMQRUN_") or name == "NAMESRV_ADDR":
            monkeypatch.delenv(name)


def reader_on(path: Path, text: str):  # type: ignore[no-untyped-def]
    path.write_text(text)
    return config_reader(CLI, path, table.resolve(CLI, config_file=path, environ={}))


def test_a_changed_recycling_limit_brings_its_computed_jitter_along(  # type: ignore[no-untyped-def]
        tmp_path: Path, monkeypatch) -> None:
    no_settings_in_env(monkeypatch)
    f = tmp_path / "c.yaml"
    read = reader_on(f, "max_messages_per_worker: 1000\nnamespace: NS\n")
    f.write_text("max_messages_per_worker: 2000\nnamespace: OTHER\nkill_grace: 3\ncrash_window: 7\n")
    change = read()
    # 10% of the new limit, not the 100 the running workers computed from the old one
    assert change.worker["max_messages"] == 2000 and change.worker["max_messages_jitter"] == 200
    assert change.worker["kill_grace"] == 3.0 and change.pool == {"crash_window": 7.0}
    assert "namespace" not in change.worker and "consumer_group" not in change.worker
    assert any(line.startswith("namespace NS -> OTHER") for line in change.need_restart), change.need_restart


def test_an_unchanged_file_changes_no_worker_setting(  # type: ignore[no-untyped-def]
        tmp_path: Path, monkeypatch) -> None:
    no_settings_in_env(monkeypatch)
    f = tmp_path / "c.yaml"
    read = reader_on(f, "max_messages_per_worker: 1000\nworkers: 2\n")
    running = table.build(table.resolve(CLI, config_file=f, environ={})).pool.worker
    change = read()
    assert change.applied == () and change.pool == {}
    assert all(getattr(running, k) == v for k, v in change.worker.items()), change.worker
