"""``scripts/flake_hunt.py``: it names every test that failed in any run, and its CPU burners never outlive it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.waiting import eventually

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "scripts"))

from flake_hunt import Burners, main, parse_failures, parse_summary  # noqa: E402

OUTPUT = """\
.....F..E [100%]
=========================== short test summary info ============================
FAILED tests/integration/test_broker_acl_cpp.py::test_refused[credentials0-Check signature failed] - assert 1 >= 2
ERROR tests/unit/test_x.py::test_y - RuntimeError: boom
FAILED tests/unit/test_z.py::TestA::test_b
FAILED tests/integration/test_broker_acl_cpp.py::test_refused[credentials0-Check signature failed] - again
1 failed, 2533 passed, 1 error in 810.21s (0:13:30)
"""


def test_the_summary_names_every_failed_and_errored_test_once() -> None:
    assert parse_failures(OUTPUT) == [
        "tests/integration/test_broker_acl_cpp.py::test_refused[credentials0-Check signature failed]",
        "tests/unit/test_x.py::test_y",
        "tests/unit/test_z.py::TestA::test_b",
    ]
    assert parse_summary(OUTPUT) == "1 failed, 2533 passed, 1 error in 810.21s (0:13:30)"
    assert parse_summary("=== 3 passed in 1.0s ===\n") == "3 passed in 1.0s"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").exists() and Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def test_burners_spin_until_the_block_ends() -> None:
    with Burners(2, seconds=300) as burners:
        assert burners.alive() == 2
    assert burners.alive() == 0 and all(p.returncode is not None for p in burners.procs)


def test_a_burner_ends_by_itself_when_the_script_is_killed(tmp_path: Path) -> None:
    """``kill -9`` of the hunt runs no cleanup: each burner notices its parent is gone and stops."""
    code = ("import os, sys; sys.path.insert(0, sys.argv[1]); from flake_hunt import Burners\n"
            "b = Burners(1, seconds=300).__enter__(); print(b.procs[0].pid, flush=True); os._exit(0)")
    out = subprocess.run([sys.executable, "-c", code, str(ROOT / "scripts")], capture_output=True, text=True, timeout=60,
                         check=True)
    pid = int(out.stdout.split()[0])
    eventually(lambda: not _pid_alive(pid), what=f"burner {pid} to stop after its parent died")


def test_a_test_failing_in_one_run_of_two_is_named_with_its_count(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Two runs from fresh clones of a tiny repository: a test that fails every other run is listed 1/2."""
    repo = tmp_path / "repo"
    repo.mkdir()
    counter = tmp_path / "runs"
    (repo / "test_sample.py").write_text(
        "import os\nfrom pathlib import Path\n\n"
        "def test_steady():\n    assert True\n\n"
        "def test_every_other_run():\n"
        f"    p = Path({str(counter)!r})\n"
        "    n = int(p.read_text()) + 1 if p.exists() else 1\n"
        "    p.write_text(str(n))\n"
        "    assert n % 2 == 0, 'odd run'\n")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(git[:3] + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-qm", "sample"], check=True)

    status = main(["--runs", "2", "--burners", "1", "--source", str(repo), "--logs", str(tmp_path / "logs"),
                   "--", "-q", "-p", "no:randomly", "test_sample.py"])
    out = capsys.readouterr().out
    assert status == 1, out
    assert "run 1: RED (exit 1)" in out and "run 2: green" in out, out
    assert "  1/2  test_sample.py::test_every_other_run" in out and "test_steady" not in out.split("any run")[-1]
    assert sorted(p.name for p in (tmp_path / "logs").iterdir()) == ["run1.log", "run2.log"]
