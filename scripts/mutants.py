#!/usr/bin/env python3
"""Break rmqrun's guarantee lines one at a time and check that the tests notice.

Each entry of :data:`MUTANTS` (in ``scripts/mutants_table.py``) names a file, an
exact piece of text in it that must occur exactly once, its replacement, and
the few tests that must fail when the text is replaced. For each mutant the
script copies the repository to a temporary directory, applies the one change,
and runs ``python -m pytest -x -q <tests>`` in the copy with the copy first on
``PYTHONPATH``, so worker processes, ``rmqrun run`` and anything else the tests
start import the mutant too (the ``canary-*`` entries fail only if they do).

``--baseline`` runs the same test sets on unmutated copies: they must pass, or
a "caught" above means nothing. Outcomes: **caught** (the tests failed), **survived** (they passed: a hole in
the tests), **stale** (the text no longer occurs exactly once: the code moved
on and the entry must be updated), **error** (pytest could not run the tests:
a wrong test id, a collection error). The exit status is non-zero unless every
selected mutant is caught.

Usage::

    python scripts/mutants.py                  # every mutant, one at a time
    python scripts/mutants.py --list           # the table, without running anything
    python scripts/mutants.py --only commit-min-offset,retry-republish
    python scripts/mutants.py -j 2 --timeout 400
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from mutants_table import MUTANTS, Mutant  # noqa: E402

_IGNORE = shutil.ignore_patterns(".venv", ".git", "__pycache__", "*.egg-info", ".pytest_cache", ".hypothesis",
                                 ".coverage*", "htmlcov", "rmqrun-data")


@dataclass
class Outcome:
    mutant: Mutant
    status: str  # caught / survived / stale / error / timeout
    seconds: float
    detail: str = ""


def _copy_repo(dest: Path) -> Path:
    """The repository (without venv and git) at ``dest/repo``; the captures travel inside it (tests/data)."""
    repo = dest / "repo"
    shutil.copytree(ROOT, repo, ignore=_IGNORE, symlinks=True)
    return repo


def apply(mutant: Mutant, repo: Path) -> str | None:
    """Apply the mutation in ``repo``; returns why it is stale, or None when applied."""
    path = repo / mutant.file
    if not path.exists():
        return f"{mutant.file} does not exist"
    text = path.read_text()
    count = text.count(mutant.find)
    if count != 1:
        return f"pattern found {count} times in {mutant.file} (must be exactly once)"
    path.write_text(text.replace(mutant.find, mutant.replace, 1))
    return None


def _env(repo: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(repo)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.pop("COVERAGE_PROCESS_START", None)
    return env


def run_one(mutant: Mutant, timeout: float, keep: bool = False, baseline: bool = False) -> Outcome:
    started = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix=f"rmqrun-mutant-{mutant.id}-"))
    try:
        repo = _copy_repo(tmp)
        stale = apply(mutant, repo)
        if baseline and stale is None:
            shutil.copy2(ROOT / mutant.file, repo / mutant.file)  # the tests must pass without the mutation
        if stale is not None:
            return Outcome(mutant, "stale", time.monotonic() - started, stale)
        # the copy must shadow the installed package, or nothing here tests the mutant
        probe = subprocess.run([sys.executable, "-c", "import rmqrun, sys; sys.stdout.write(rmqrun.__file__)"],
                               cwd=repo, env=_env(repo), capture_output=True, text=True, timeout=60)
        if not probe.stdout.startswith(str(repo)):
            return Outcome(mutant, "error", time.monotonic() - started,
                           f"the copy does not shadow the installed rmqrun: {probe.stdout or probe.stderr}")
        cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *mutant.tests]
        # its own process group, so that a timeout or an interrupt also ends the workers and
        # brokers the tests started
        proc = subprocess.Popen(cmd, cwd=repo, env=_env(repo), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, start_new_session=True)
        _RUNNING.add(proc)
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            out, _ = proc.communicate()
            return Outcome(mutant, "timeout", time.monotonic() - started,
                           f"tests still running after {timeout:g} s (counted as caught)\n{out[-2000:]}")
        finally:
            _RUNNING.discard(proc)
        elapsed = time.monotonic() - started
        tail = out[-3000:]
        if baseline:
            return Outcome(mutant, "passes" if proc.returncode == 0 else "FAILS", elapsed,
                           "" if proc.returncode == 0 else tail)
        if proc.returncode == 0:
            return Outcome(mutant, "survived", elapsed, tail)
        if proc.returncode == 1:
            return Outcome(mutant, "caught", elapsed, _first_failure(out))
        return Outcome(mutant, "error", elapsed, f"pytest exited with {proc.returncode}\n{tail}")
    finally:
        if keep:
            print(f"kept {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


_RUNNING: set[subprocess.Popen] = set()  # type: ignore[type-arg]


def _kill_group(proc: subprocess.Popen) -> None:  # type: ignore[type-arg]
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _on_signal(signum: int, frame: object) -> None:
    """Interrupted: end the running test groups; the ``finally`` blocks remove the copies."""
    for proc in list(_RUNNING):
        _kill_group(proc)
    raise KeyboardInterrupt


def _first_failure(stdout: str) -> str:
    for line in stdout.splitlines():
        if line.startswith("FAILED") or line.startswith("ERROR"):
            return line
    return ""


def _print_table(outcomes: list[Outcome]) -> None:
    rows = [("id", "file", "what", "result", "seconds")]
    for o in outcomes:
        rows.append((o.mutant.id, o.mutant.file.removeprefix("rmqrun/"), o.mutant.what, o.status, f"{o.seconds:.1f}"))
    widths = [min(max(len(r[i]) for r in rows), 70) for i in range(4)]
    for r in rows:
        print("  ".join(r[i][:70].ljust(widths[i]) for i in range(4)) + "  " + r[4].rjust(7))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", help="comma-separated mutant ids")
    ap.add_argument("--list", action="store_true", help="print the table and exit")
    ap.add_argument("-j", "--jobs", type=int, default=1, help="mutants run at the same time (default 1)")
    ap.add_argument("--timeout", type=float, default=420.0, help="seconds for one mutant's tests (default 420)")
    ap.add_argument("--keep", action="store_true", help="keep the mutated copies (for debugging)")
    ap.add_argument("--baseline", action="store_true",
                    help="run each selected mutant's tests on an unmutated copy instead (they must pass)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print pytest's output for survivors and errors")
    args = ap.parse_args(argv)

    ids = [m.id for m in MUTANTS]
    dupes = {i for i in ids if ids.count(i) > 1}
    if dupes:
        ap.error(f"duplicate mutant ids in the table: {sorted(dupes)}")
    selected = list(MUTANTS)
    if args.only:
        wanted = [s.strip() for s in args.only.split(",") if s.strip()]
        unknown = [w for w in wanted if w not in ids]
        if unknown:
            ap.error(f"--only: unknown mutant id(s) {unknown}; see --list")
        selected = [m for m in MUTANTS if m.id in wanted]
    if args.jobs < 1:
        ap.error(f"-j/--jobs must be at least 1, got {args.jobs}")
    if args.list:
        for m in selected:
            print(f"{m.id:28} {m.file:45} {m.what}")
            print(f"{'':28} tests: {' '.join(m.tests)}")
        print(f"{len(selected)} mutant(s)")
        return 0

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    started = time.monotonic()
    outcomes: list[Outcome] = []
    pool = cf.ThreadPoolExecutor(max_workers=args.jobs)
    try:
        futures = {pool.submit(run_one, m, args.timeout, args.keep, args.baseline): m for m in selected}
        for fut in cf.as_completed(futures):
            o = fut.result()
            outcomes.append(o)
            print(f"[{len(outcomes)}/{len(selected)}] {o.mutant.id}: {o.status} ({o.seconds:.1f} s)"
                  + (f" {o.detail.splitlines()[0]}" if o.detail and o.status != "caught" else ""), flush=True)
            if args.verbose and o.status in ("survived", "error", "FAILS"):
                print(o.detail)
    except KeyboardInterrupt:
        pool.shutdown(wait=False, cancel_futures=True)
        for proc in list(_RUNNING):
            _kill_group(proc)
        pool.shutdown(wait=True)  # the running ones return now; their copies are removed
        print(f"interrupted after {len(outcomes)} of {len(selected)} mutants", file=sys.stderr)
        return 130
    finally:
        pool.shutdown(wait=True)
    order = {m.id: i for i, m in enumerate(selected)}
    outcomes.sort(key=lambda o: order[o.mutant.id])
    print()
    _print_table(outcomes)
    if args.baseline:
        bad = [o for o in outcomes if o.status != "passes"]
        print(f"\nbaseline: {len(outcomes) - len(bad)} of {len(outcomes)} test sets pass without their mutation")
        return 1 if bad else 0
    counts = {s: sum(1 for o in outcomes if o.status == s) for s in ("caught", "timeout", "survived", "stale", "error")}
    print(f"\n{len(outcomes)} mutants: {counts['caught']} caught, {counts['timeout']} caught by timeout, "
          f"{counts['survived']} survived, {counts['stale']} stale, {counts['error']} errors "
          f"in {time.monotonic() - started:.0f} s")
    return 0 if counts["survived"] + counts["stale"] + counts["error"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
