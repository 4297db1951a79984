"""scripts/bench_ab_drain.py end to end on a tiny backlog: which tree each side's broker really imports.

The "before" tree is a copy of this checkout whose broker writes to a file its pid and module path when it starts
and the name of each consumer group that registers with it, so the file says which broker processes ran from the
copy and which drains they served."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "bench_ab_drain.py"
IMPORT_LINE = "from rmqrun.broker.app import run\n"
REGISTER_LINE = "        info = self.groups.get(data.group_name)\n"


def insert_after(path: Path, line: str, added: str) -> None:
    text = path.read_text()
    assert text.count(line) == 1, f"{path}: the line to mark after moved"
    path.write_text(text.replace(line, line + added))


def marked_copy(dest: Path, marks: Path) -> Path:
    """A copy of this checkout's rmqrun and workers whose broker appends "pid path" to ``marks`` when it starts
    and "group NAME" for each consumer group that registers."""
    for name in ("rmqrun", "workers"):
        shutil.copytree(ROOT / name, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
    insert_after(dest / "rmqrun" / "broker" / "__main__.py", IMPORT_LINE,
                 f"open({str(marks)!r}, 'a').write(f'{{os.getpid()}} {{os.path.abspath(__file__)}}\\n')\n")
    insert_after(dest / "rmqrun" / "broker" / "groups.py", REGISTER_LINE,
                 f"        open({str(marks)!r}, 'a').write(f'group {{data.group_name}}\\n')\n")
    return dest


@pytest.mark.parametrize("broker_too", [True, False], ids=["broker-too", "shared-broker"])
def test_each_side_drains_on_the_broker_of_its_own_tree_only_with_broker_too(tmp_path: Path,
                                                                            broker_too: bool) -> None:
    marks = tmp_path / "marks.txt"
    before = marked_copy(tmp_path / "before", marks)
    out = tmp_path / "ab.json"
    run = subprocess.run([sys.executable, str(SCRIPT), "--before", str(before), "--after", str(ROOT),
                          "--messages", "2000", "--rounds", "1", "--timeout", "120", "--json", str(out)]
                         + (["--broker-too"] if broker_too else []),
                         capture_output=True, text=True, timeout=300, cwd=ROOT,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert run.returncode == 0, run.stderr[-2000:]

    rows = json.loads(out.read_text())
    assert sorted(rows) == ["concurrent after", "concurrent before"]
    assert [d["broker_tree"] for d in rows["concurrent after"]] == [str(ROOT)]
    header = {line.split()[0]: line for line in run.stdout.splitlines()[:2]}
    pids = {side: int(line.rsplit("(pid ", 1)[1].split(")")[0].split(",")[0]) for side, line in header.items()}
    if broker_too:
        assert [d["broker_tree"] for d in rows["concurrent before"]] == [str(before)]
        assert pids["before"] != pids["after"]
        # the before side's broker imported the marked copy and served the before drain; the after side's did not
        lines = marks.read_text().splitlines()
        assert lines[0] == f"{pids['before']} {before / 'rmqrun' / 'broker' / '__main__.py'}"
        assert set(lines[1:]) == {"group CG_concurrent_before_0"}
    else:
        assert [d["broker_tree"] for d in rows["concurrent before"]] == [str(ROOT)]
        assert pids["before"] == pids["after"] and "shared" in header["before"]
        assert not marks.exists(), "the shared broker ran from the before tree"
