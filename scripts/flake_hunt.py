#!/usr/bin/env python3
"""Hunt flaky tests: run the README's test command K times from a clean clone beside a steady CPU load.

A test that passes alone and fails on a busy machine waits for time instead of for its event, or asserts
what a scheduler usually does instead of what the code guarantees (``docs/testing.md``, "Keeping the suite
deterministic"). This script makes the busy machine on purpose: ``--burners`` processes spin on the CPU
(each bounded in time and ending with this script, even when it is killed), while the suite runs
``--runs`` times from a fresh ``git clone`` of the checkout's HEAD (what a new user runs: committed files
only, nothing beside it). It prints every test that failed in any run, with how many runs it failed in.

Usage:
    python scripts/flake_hunt.py                        # 3 runs of the README's command beside 2 burners
    python scripts/flake_hunt.py --runs 5 --burners 4   # harder
    python scripts/flake_hunt.py --runs 10 -- tests/integration/test_broker_longpoll.py -q
                                                        # a subset: pytest arguments after ``--``
    python scripts/flake_hunt.py --in-place -- tests/unit -q   # the working tree as it is (uncommitted too)

Exit status: 0 when every run passed, 1 when any test failed (or a run ended without passing), 2 on usage.
Each run's whole output is kept under ``--logs`` (a temporary directory unless given) for reading.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: the README's test command's pytest arguments (``.ci/run`` runs the same); ``-rfE`` lists what failed
README_ARGS = ["-q", "-m", "not slow", "-n", "3", "--dist", "loadfile"]
REPORT_ARGS = ["-rfE", "-p", "no:cacheprovider"]

#: a burner: spin until its deadline or until the process that started it is gone (no orphan survives a kill -9)
BURNER = """
import os, sys, time
end, parent = float(sys.argv[1]), int(sys.argv[2])
n = 0
while True:
    n += 1
    if n % 200000 == 0 and (time.monotonic() > end or os.getppid() != parent):
        break
"""

#: a ``-rfE`` summary line: the test id runs to the " - " before the message (ids may hold spaces)
_OUTCOME = re.compile(r"^(FAILED|ERROR) (.+?)(?: - .*)?$")
_SUMMARY = re.compile(r"^=*\s*(.*\b(?:passed|failed|error|errors|no tests ran)\b.*?)\s*=*$")


@dataclass
class RunResult:
    """One run of the suite: its exit status, how long it took, the load around it and what failed."""

    index: int
    returncode: int
    seconds: float
    load_before: str
    load_after: str
    summary: str
    failed: list[str] = field(default_factory=list)
    log: Path | None = None

    @property
    def green(self) -> bool:
        return self.returncode == 0 and not self.failed


class Burners:
    """``count`` busy-looping processes for at most ``seconds``; stopped when the block ends, however it ends."""

    def __init__(self, count: int, seconds: float, python: str = sys.executable) -> None:
        self.count, self.seconds, self.python = count, seconds, python
        self.procs: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> "Burners":
        end = time.monotonic() + self.seconds  # CLOCK_MONOTONIC is one clock for every process of the machine
        for _ in range(self.count):
            self.procs.append(subprocess.Popen([self.python, "-c", BURNER, repr(end), str(os.getpid())],
                                               stdin=subprocess.DEVNULL))
        return self

    def alive(self) -> int:
        return sum(p.poll() is None for p in self.procs)

    def __exit__(self, *exc: object) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
        for p in self.procs:
            p.wait()


def parse_failures(output: str) -> list[str]:
    """The test ids pytest's ``-rfE`` summary names as FAILED or ERROR, in order, each once."""
    seen: dict[str, None] = {}
    for line in output.splitlines():
        match = _OUTCOME.match(line.strip())
        if match:
            seen.setdefault(match.group(2), None)
    return list(seen)


def parse_summary(output: str) -> str:
    """pytest's last line ("1 failed, 2533 passed in 810.2s"), or what is left of the output without one."""
    for line in reversed(output.strip().splitlines()):
        match = _SUMMARY.match(line.strip())
        if match:
            return match.group(1)
    return (output.strip().splitlines() or ["(no output)"])[-1]


def load_average() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def clone(source: Path, into: Path) -> Path:
    """A fresh clone of ``source``'s HEAD (committed files only), as a new user gets the project."""
    subprocess.run(["git", "clone", "-q", str(source), str(into)], check=True)
    return into


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass  # the run and everything it started are gone already
    proc.wait()


def run_suite(index: int, workdir: Path, python: str, pytest_args: list[str], logs: Path,
              timeout: float) -> RunResult:
    """One run of pytest in ``workdir`` with that tree first on the path (workers and CLIs import it too)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(workdir), os.environ.get("PYTHONPATH", "")]).rstrip(
        os.pathsep))
    log = logs / f"run{index}.log"
    load_before, began = load_average(), time.monotonic()
    with open(log, "w") as out:
        # its own session: a run past its limit is killed whole (xdist workers, brokers, worker pools)
        proc = subprocess.Popen([python, "-m", "pytest", *pytest_args, *REPORT_ARGS], cwd=workdir, env=env,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            returncode = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            out.write(f"\nflake_hunt: the run passed its {timeout:g} s limit and was killed\n")
            returncode = -9
        finally:  # whatever ended the run: nothing it started outlives it
            _kill_group(proc)
    seconds = time.monotonic() - began
    output = log.read_text(errors="replace")
    return RunResult(index, returncode, seconds, load_before, load_average(), parse_summary(output),
                     parse_failures(output), log)


def report(results: list[RunResult], burners: int) -> str:
    """The closing table: each run, then every test that failed in any run with its count."""
    lines = [f"flake hunt: {len(results)} run(s) beside {burners} CPU burner(s)"]
    for r in results:
        verdict = "green" if r.green else f"RED (exit {r.returncode})"
        lines.append(f"  run {r.index}: {verdict}, {r.seconds / 60:.1f} min, load {r.load_before} -> "
                     f"{r.load_after}: {r.summary}  [{r.log}]")
    counts = Counter(test for r in results for test in r.failed)
    if counts:
        lines.append("tests that failed in any run (runs failed / runs):")
        lines += [f"  {n}/{len(results)}  {test}" for test, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
    elif all(r.green for r in results):
        lines.append("no test failed in any run")
    else:
        lines.append("a run ended red without naming a failed test: read its log")
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> tuple[argparse.Namespace, list[str]]:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1:]
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 epilog="pytest arguments after -- replace the README's (-q -m 'not slow' -n 3 "
                                        "--dist loadfile)")
    ap.add_argument("--runs", type=int, default=3, help="how many times to run the suite (default 3)")
    ap.add_argument("--burners", type=int, default=2, help="busy-looping processes beside it (default 2)")
    ap.add_argument("--run-timeout", type=float, default=3600.0, help="seconds one run may take (default 3600)")
    ap.add_argument("--python", default=sys.executable, help="the interpreter with the test extras installed")
    ap.add_argument("--source", type=Path, default=ROOT, help="the git checkout to clone (default: this one)")
    ap.add_argument("--in-place", action="store_true", help="run in --source itself instead of a fresh clone")
    ap.add_argument("--logs", type=Path, help="where each run's output is kept (default: a new temporary directory)")
    args = ap.parse_args(argv)
    if args.runs < 1 or args.burners < 0 or args.run_timeout <= 0:
        ap.error("need --runs >= 1, --burners >= 0 and --run-timeout > 0")
    return args, extra or README_ARGS


def main(argv: list[str] | None = None) -> int:
    args, pytest_args = parse_args(argv)
    logs = args.logs or Path(tempfile.mkdtemp(prefix="flake_hunt_logs_"))
    logs.mkdir(parents=True, exist_ok=True)
    scratch = None if args.in_place else Path(tempfile.mkdtemp(prefix="flake_hunt_"))
    results: list[RunResult] = []
    try:
        with Burners(args.burners, args.runs * args.run_timeout + 600, args.python):
            for i in range(1, args.runs + 1):
                workdir = args.source.resolve() if scratch is None else clone(args.source, scratch / f"run{i}")
                print(f"run {i}/{args.runs} in {workdir}, load {load_average()} ...", flush=True)
                result = run_suite(i, workdir, args.python, pytest_args, logs, args.run_timeout)
                results.append(result)
                print(f"run {i}: {result.summary} ({result.seconds / 60:.1f} min); failed: "
                      f"{', '.join(result.failed) or 'none'}", flush=True)
                if scratch is not None:
                    shutil.rmtree(workdir, ignore_errors=True)
    except KeyboardInterrupt:
        print("interrupted: the burners are stopped; the runs so far:", file=sys.stderr)
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    print(report(results, args.burners))
    return 0 if results and all(r.green for r in results) and len(results) == args.runs else 1


if __name__ == "__main__":
    sys.exit(main())
