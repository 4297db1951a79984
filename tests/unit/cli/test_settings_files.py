"""The shipped config files agree with the settings table and with how rmqrun stops.

The systemd unit is read as systemd reads it (sections of key=value lines,
repeated keys accumulate) and checked for what a Type=notify rmqrun service
needs; the YAML examples must load through the table and name every common
setting (every setting that has a flag), so they stay a complete reference.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from rmqrun.cli import settings as table

CONFIG = Path(__file__).resolve().parents[3] / "config"


def read_unit(path: Path) -> dict[str, dict[str, list[str]]]:
    sections: dict[str, dict[str, list[str]]] = {}
    current = None
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), {})
            continue
        assert current is not None, f"key outside a section: {line}"
        key, _, value = line.partition("=")
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def seconds(value: str) -> float:
    units = {"ms": 0.001, "s": 1, "sec": 1, "min": 60, "m": 60}
    for unit in sorted(units, key=len, reverse=True):
        if value.endswith(unit):
            return float(value[: -len(unit)]) * units[unit]
    return float(value)


def test_systemd_unit_is_type_notify_with_watchdog_and_a_restart_policy() -> None:
    unit = read_unit(CONFIG / "rmqrun.service")
    svc = unit["Service"]
    assert svc["Type"] == ["notify"]
    assert svc["NotifyAccess"] == ["main"], "only the supervisor notifies"
    assert seconds(svc["WatchdogSec"][0]) > 0
    assert svc["Restart"] == ["on-failure"]
    assert svc["KillSignal"] == ["SIGTERM"]
    assert svc["KillMode"] == ["mixed"], "SIGTERM must reach the supervisor only, not the workers"
    assert svc["User"][0] not in ("root", "") and svc["Group"][0]
    assert any(v.strip('"').startswith("NAMESRV_ADDR=") for v in svc["Environment"])
    exec_start = svc["ExecStart"][0].split()
    assert exec_start[0].endswith("/rmqrun") and exec_start[1] == "run" and "--config" in exec_start
    assert "2" in svc["RestartPreventExitStatus"][0].split() and "3" in svc["RestartPreventExitStatus"][0].split()
    assert unit["Install"]["WantedBy"] == ["multi-user.target"]


def test_unit_stop_timeout_exceeds_the_graceful_timeout() -> None:
    svc = read_unit(CONFIG / "rmqrun.service")["Service"]
    grace = table.BY_KEY["graceful_timeout"].default
    example = yaml.safe_load((CONFIG / "example.yaml").read_text())
    grace = max(grace, float(example.get("graceful_timeout", grace)))
    assert seconds(svc["TimeoutStopSec"][0]) > grace


def test_example_yaml_names_every_common_setting() -> None:
    text = (CONFIG / "example.yaml").read_text()
    keys = {k.replace("-", "_") for k in yaml.safe_load(text)}
    commented = {line.lstrip("# ").split(":")[0] for line in text.splitlines() if line.startswith("# ")}
    for s in table.SETTINGS:
        if s.flag is not None:
            assert s.key in keys or s.key in commented, f"config/example.yaml does not mention {s.key}"


def test_example_files_resolve_without_unknown_keys() -> None:
    for path in sorted(CONFIG.glob("*.yaml")):
        resolved = table.resolve({}, config_file=path, environ={})
        table.build(resolved)
        from_file = [k for k, src in resolved.sources.items() if src.startswith("config file")]
        assert len(from_file) == len(yaml.safe_load(path.read_text())), path
