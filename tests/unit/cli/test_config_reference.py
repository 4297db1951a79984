"""docs/configuration.md is the settings table, not a copy that drifts from it."""

from __future__ import annotations

from pathlib import Path

from rmqrun.cli.settings import SETTINGS, markdown

DOC = Path(__file__).resolve().parents[3] / "docs" / "configuration.md"


def test_the_configuration_reference_matches_the_settings_table() -> None:
    assert DOC.read_text() == markdown(), "docs/configuration.md is stale: run python scripts/gen_config_reference.py"


def test_every_setting_has_one_row_with_its_variable() -> None:
    rows = [line for line in markdown().splitlines() if line.startswith("| `")]
    assert len(rows) == len(SETTINGS)
    for setting, row in zip(SETTINGS, rows):
        assert row.startswith(f"| `{setting.key}` | `{setting.env}` |")
