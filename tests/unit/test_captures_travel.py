"""The real-broker captures travel with the code: a plain clone runs every conformance test.

Before, the captures were read from a ``shared/protocol`` folder beside the checkout and the tests that need them
were skipped in any clone without it (83 tests). Now they ship in ``tests/data/protocol`` and nothing skips for
their absence; these tests keep it that way.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import captures

REPO = Path(__file__).resolve().parent.parent.parent


def _git(*args: str, cwd: Path = REPO) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def test_every_scenario_is_inside_the_repository_and_tracked_by_git() -> None:
    if "CAPTURES_DIR" in os.environ:
        pytest.skip("CAPTURES_DIR points the tests at another copy of the captures")
    assert captures.PROTOCOL_DIR.resolve().is_relative_to(REPO)
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    tracked = set(_git("ls-files", "--", str(captures.PROTOCOL_DIR.relative_to(REPO))).split())
    for name in captures.SCENARIOS.values():
        for suffix in (".jsonl", ".timeline.txt", ".codes.txt"):
            rel = f"{captures.PROTOCOL_DIR.relative_to(REPO)}/{name}{suffix}"
            assert rel in tracked, f"{rel} is not tracked by git: a clone would not have it"


def test_every_scenario_loads_frames() -> None:
    for key in captures.SCENARIOS:
        frames = captures.load(key)
        assert frames, key
        assert all(f.raw for f in frames)


def test_no_test_skips_for_missing_captures() -> None:
    """No test file decides at run time whether the captures exist (the old ``available()`` gate)."""
    offenders = []
    for path in (REPO / "tests").rglob("*.py"):
        if path.resolve() == Path(__file__).resolve():
            continue
        text = path.read_text(encoding="utf-8")
        if re.search(r"captures\.available\(|captured frames not found|\"shared\" / \"protocol\"|shared/protocol", text):
            offenders.append(str(path.relative_to(REPO)))
    assert not offenders


def test_a_plain_clone_runs_the_codec_conformance_tests_with_none_skipped(tmp_path: Path) -> None:
    """A clone in a folder with no ``shared/`` beside it: the capture-driven codec tests all run."""
    if not (REPO / ".git").exists() or shutil.which("git") is None:
        pytest.skip("not a git checkout")
    if _git("status", "--porcelain", "--", "tests/data", "tests/captures.py"):
        pytest.skip("the captures or their reader have uncommitted changes; a clone would test HEAD instead")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--no-local", str(REPO), str(clone)], check=True)
    assert not (tmp_path / "shared").exists()
    env = {k: v for k, v in os.environ.items() if k not in ("CAPTURES_DIR", "PYTEST_XDIST_WORKER")}
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "-rs",
         "tests/conformance/test_wire_codec.py"],
        cwd=clone, env=env, capture_output=True, text=True, timeout=280)
    tail = out.stdout[-3000:] + out.stderr[-2000:]
    assert out.returncode == 0, tail
    summary = out.stdout.strip().splitlines()[-1]
    assert re.search(r"\d+ passed", summary), tail
    assert "skipped" not in summary, tail
