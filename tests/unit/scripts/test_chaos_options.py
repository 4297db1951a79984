"""scripts/chaos.py refuses bad options with one line naming the option and the value."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))

import chaos  # noqa: E402


@pytest.mark.parametrize("argv, expect", [
    (["--minutes", "0"], "--minutes must be > 0, got 0.0"),
    (["--rate", "-5"], "--rate must be > 0, got -5.0"),
    (["--keys", "0"], "--keys must be >= 1, got 0"),
    (["--workers", "0"], "--workers must be >= 1, got 0"),
    (["--seed", "abc"], "argument --seed: invalid int value: 'abc'"),
])
def test_bad_options_are_refused(argv: list[str], expect: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        chaos.parse_args(argv)
    assert exc.value.code == 2
    assert expect in capsys.readouterr().err


def test_good_options(tmp_path: Path) -> None:
    o = chaos.parse_args(["--minutes", "0.5", "--seed", "3", "--workdir", str(tmp_path / "w")])
    assert (o.minutes, o.seed, o.rate, o.keys) == (0.5, 3, 40.0, 16) and o.workdir.is_dir()
