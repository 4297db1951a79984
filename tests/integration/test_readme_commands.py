"""The README's quick start and "Using it" commands run as written (``scripts/readme_check.py``).

The script reads the commands out of README.md itself, so these tests follow the README as it
is edited: a command that stops working, or a new one that never did, fails here. What the
script does (a fresh checkout of the working tree, free ports, the two long-running commands
in the background) is in its docstring.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "readme_check.py"
VENV = Path(sys.prefix)


def readme_commands(readme: str) -> list[str]:
    """Every command line of the sh blocks of "## Using it", read independently of the script."""
    text = readme.split("\n## Using it", 1)[1].split("\n## ", 1)[0]
    lines = []
    for block in re.findall(r"^```sh\n(.*?)^```", text, re.M | re.S):
        lines += [ln.strip() for ln in block.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    return lines


def run_check(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """The script to its end. ``timeout`` only ends a failure (every README command is a process start, and a
    loaded 2-core machine took over 400 s for them): past it the script gets SIGTERM, so that it stops the
    broker and the runs it started in their own sessions, and the test fails with what it had printed."""
    proc = subprocess.Popen([sys.executable, str(SCRIPT), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=REPO)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.terminate()
        try:
            out, err = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        pytest.fail(f"readme_check.py still running after {timeout:g} s:\n{out[-4000:]}{err[-4000:]}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.mark.timeout(1100)
def test_using_it_commands_run_as_written() -> None:
    if not (VENV / "bin" / "rmqrun").exists():
        pytest.fail(f"the test venv {VENV} has no bin/rmqrun (pip install -e . first)")
    proc = run_check("--venv", str(VENV), timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    expected = readme_commands((REPO / "README.md").read_text())
    assert len(expected) >= 15  # the README's blocks were found, not an empty section
    ran = [ln[len("ok    "):] for ln in proc.stdout.splitlines() if ln.startswith("ok    ")]
    for line in expected:
        assert any(r == line or r.startswith(line + "    [") for r in ran), (line, proc.stdout[-4000:])
    # Both long-running commands were stopped and exited 0; the consumer drained the backlog.
    assert "[stopped: 1000 messages consumed, 0 failed]" in proc.stdout
    assert "ok    stopped `rmqrun broker --data-dir ./rmqrun-data" in proc.stdout
    assert proc.stdout.rstrip().endswith("README commands: all ok")


@pytest.mark.timeout(800)
def test_a_readme_command_that_does_not_work_is_reported(tmp_path: Path) -> None:
    readme = (REPO / "README.md").read_text()
    broken = readme.replace("rmqrun topic describe Orders ", "rmqrun topic describe NoSuchTopic ", 1)
    assert broken != readme
    path = tmp_path / "README.md"
    path.write_text(broken)
    proc = run_check("--venv", str(VENV), "--readme", str(path), timeout=600)
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert "FAIL  `rmqrun topic describe NoSuchTopic" in proc.stderr
    assert "exited 1" in proc.stderr and "topic 'NoSuchTopic' does not exist on the name server" in proc.stderr
    # It stopped there, and stopped the broker it had started.
    assert "rmqrun offsets reset" not in proc.stdout
    assert "ok    stopped `rmqrun broker" in proc.stdout


@pytest.mark.slow  # a fresh venv and pip install: about a minute and a half; CI's own fresh install covers it
@pytest.mark.timeout(1100)
def test_quick_start_from_a_fresh_checkout(tmp_path: Path) -> None:
    """The quick start exactly as written: a new venv, pip install -e ., rmqrun demo; then the
    "Using it" commands with that venv's rmqrun."""
    proc = run_check("--workdir", str(tmp_path), timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert re.search(r"^ok    quick start    \[20000 messages handled in .* 0 failed\]$", proc.stdout, re.M), \
        proc.stdout[-3000:]
    assert (tmp_path / "rmqrun" / ".venv" / "bin" / "rmqrun").exists()
    assert proc.stdout.rstrip().endswith("README commands: all ok")


@pytest.mark.timeout(1100)
def test_watch_follow_and_a_run_named_by_its_config_file_are_run_and_stopped(tmp_path: Path) -> None:
    """Commands others may add to the README: ``--watch`` (stopped with SIGINT, must exit 0) and an
    ``rmqrun run`` whose group comes from ``--config`` (read back from its own log)."""
    readme = (REPO / "README.md").read_text()
    extended = readme.replace(
        "rmqrun topic delete Audit ",
        "rmqrun status --group OrderScoring --watch --interval 0.5\n"
        "rmqrun read --topic Orders --from latest --follow\n"
        "rmqrun run --config config/example.yaml --topic Orders --workers 1\n"
        "rmqrun topic delete Audit ", 1)
    assert extended != readme
    path = tmp_path / "README.md"
    path.write_text(extended)
    proc = run_check("--venv", str(VENV), "--readme", str(path), timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    # each --watch round starts with the time it was taken (then "group OrderScoring" and the table)
    assert re.search(r"^ok    rmqrun status --group OrderScoring --watch --interval 0\.5    "
                     r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \(every 0\.5 s; Ctrl-C to stop\)\]$", proc.stdout, re.M)
    assert "ok    rmqrun read --topic Orders --from latest --follow    [" in proc.stdout
    # example.yaml's group (example_group) is new: CONSUME_FROM_LAST_OFFSET, yet the broker answers 0
    # while a queue's first message is still in memory (RocketMQ's rule), so it consumes all 1000.
    run_line = "ok    rmqrun run --config config/example.yaml --topic Orders --workers 1    [stopped: 1000 messages"
    assert run_line in proc.stdout
