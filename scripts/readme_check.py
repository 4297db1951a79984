#!/usr/bin/env python3
"""Run the README's quick start and "Using it" commands as written, in a fresh checkout.

What it does, in order:

1. Copies the repository's files (those git tracks or would track: no ``.venv``, no caches,
   uncommitted edits included) into a new directory: a fresh clone of the working tree.
2. **Quick start**: runs the first ``sh`` block under "## Quick start" with bash, as written,
   in that checkout (it makes ``.venv``, installs rmqrun into it and runs ``rmqrun demo``).
   ``--venv DIR`` skips this step and uses an existing venv instead (for quick re-runs).
3. **Using it**: saves the handler the README shows (the ``python`` block starting
   ``# myapp/handlers.py``) as ``myapp/handlers.py``, then runs every command of the ``sh``
   blocks under "## Using it", in order, in the checkout, with the venv's ``bin/`` first on
   ``PATH`` and no ``NAMESRV_ADDR`` / ``RMQRUN_*`` inherited. Each line is split as a shell
   would (``shlex``, comments dropped); ``export K=V`` sets the variable for the lines after it.

The only liberties, so it can run beside other brokers: the name server and broker get free
ports (``--namesrv-port/--broker-port`` added to ``rmqrun broker``, ``127.0.0.1:9876`` /
``127.0.0.1:10911`` in the other lines replaced by them), and the two commands that run until
stopped are run in the background: ``rmqrun broker`` until its ready line, then until the end;
``rmqrun run`` until it consumes and its group has no lag (``rmqrun status --json``), then
SIGTERM, and it must exit 0. Every other command must exit 0. The first failure stops the run
with the README line, its exit code and output; the script then exits 1.

    python scripts/readme_check.py                    # everything (about 2 minutes here)
    python scripts/readme_check.py --venv .venv       # "Using it" only, with this venv's rmqrun
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
COMMAND_TIMEOUT = 180.0
NAMESRV, BROKER = "127.0.0.1:9876", "127.0.0.1:10911"


class CheckFailed(Exception):
    """A README command did not do what the README says."""


# --------------------------------------------------------------------------- README parsing

def section(text: str, title: str) -> str:
    """The text of the ``## title`` section (up to the next ``## `` heading)."""
    m = re.search(rf"^## {re.escape(title)}\s*$(.*?)(?=^## |\Z)", text, re.M | re.S)
    if m is None:
        raise CheckFailed(f"README has no '## {title}' section")
    return m.group(1)


def code_blocks(text: str, lang: str) -> list[str]:
    return [m.group(1) for m in re.finditer(rf"^```{lang}\n(.*?)^```", text, re.M | re.S)]


def commands(block: str) -> list[str]:
    """The command lines of an ``sh`` block (blank and comment-only lines dropped)."""
    return [ln.strip() for ln in block.splitlines() if ln.strip() and not ln.strip().startswith("#")]


# --------------------------------------------------------------------------- running

@dataclass
class Background:
    line: str
    proc: subprocess.Popen[str]
    out: list[str] = field(default_factory=list)
    reader: threading.Thread | None = None

    def pump(self) -> None:
        """Collect stdout+stderr lines in a thread (so the pipe never fills)."""
        def read() -> None:
            assert self.proc.stdout is not None
            for ln in self.proc.stdout:
                self.out.append(ln)
        self.reader = threading.Thread(target=read, daemon=True)
        self.reader.start()

    def drained(self) -> None:
        """The process has exited: wait until its last lines are read (the reader ends at the pipe's end),
        rather than sleeping and hoping (a loaded machine lost the "stopped: ..." line that way)."""
        if self.reader is not None:
            self.reader.join(60)

    def wait_for(self, pattern: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            exited = self.proc.poll() is not None
            if exited:
                self.drained()  # its last lines, then one more look
            for ln in list(self.out):
                if re.search(pattern, ln):
                    return ln
            if exited:
                break
            time.sleep(0.1)
        raise CheckFailed(f"`{self.line}` did not print /{pattern}/ within {timeout:g} s "
                          f"(exit code {self.proc.poll()}):\n{self.tail()}")

    def stop(self, timeout: float = 60.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.stacks_then_kill()
        self.drained()
        return self.proc.returncode

    def stacks_then_kill(self) -> None:
        """It did not stop when told: SIGABRT first, so faulthandler (``PYTHONFAULTHANDLER``, set for every
        command) prints where each of its threads is into the output the failure shows; SIGKILL if even
        that does not end it."""
        self.proc.send_signal(signal.SIGABRT)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.drained()

    def tail(self, n: int = 60) -> str:
        return "".join(self.out[-n:])


class Runner:
    def __init__(self, checkout: Path, venv_bin: Path, log: bool = True) -> None:
        self.checkout = checkout
        self.env = {k: v for k, v in os.environ.items()
                    if k != "NAMESRV_ADDR" and not k.startswith("RMQRUN_")}
        self.env["PATH"] = f"{venv_bin}{os.pathsep}{self.env.get('PATH', '')}"
        self.env.pop("PYTHONPATH", None)
        self.env["VIRTUAL_ENV"] = str(venv_bin.parent)
        self.env["PYTHONFAULTHANDLER"] = "1"  # a command that hangs shows its stacks (Background.stacks_then_kill)
        ns_port, broker_port = free_ports(2)
        self.ports = (ns_port, broker_port)
        self.namesrv = f"127.0.0.1:{ns_port}"
        self.broker_addr = f"127.0.0.1:{broker_port}"
        self.background: list[Background] = []
        self.log = log

    def say(self, text: str) -> None:
        if self.log:
            print(text, flush=True)

    def argv(self, line: str) -> list[str]:
        args = shlex.split(line, comments=True)
        args = [a.replace(NAMESRV, self.namesrv).replace(BROKER, self.broker_addr) for a in args]
        if args[:2] == ["rmqrun", "broker"]:
            args += ["--namesrv-port", str(self.ports[0]), "--broker-port", str(self.ports[1])]
        return args

    def run_line(self, line: str) -> None:
        args = self.argv(line)
        if not args:
            return
        if args[0] == "export":
            for assignment in args[1:]:
                key, _, value = assignment.partition("=")
                self.env[key] = value
            self.say(f"ok    {line}")
            return
        if args[:2] == ["rmqrun", "broker"]:
            bg = self.start(line, args)
            ready = bg.wait_for(r"^RMQRUN_BROKER_READY ", COMMAND_TIMEOUT)
            self.say(f"ok    {line}    [{ready.strip()}]")
            return
        if args[:2] == ["rmqrun", "run"]:
            self.run_consumer(line, args)
            return
        if "--watch" in args or "--follow" in args:
            self.run_until_interrupted(line, args)
            return
        proc = subprocess.run(args, cwd=self.checkout, env=self.env, capture_output=True, text=True,
                              timeout=COMMAND_TIMEOUT)
        if proc.returncode != 0:
            raise CheckFailed(f"`{line}` exited {proc.returncode}:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
        first = (proc.stdout.strip().splitlines() or [""])[0]
        self.say(f"ok    {line}    [{first[:100]}]")

    def start(self, line: str, args: list[str]) -> Background:
        proc = subprocess.Popen(args, cwd=self.checkout, env=self.env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
        bg = Background(line, proc)
        bg.pump()
        self.background.append(bg)
        return bg

    def run_until_interrupted(self, line: str, args: list[str]) -> None:
        """``--watch`` / ``--follow``: it must print a first line, then stop on SIGINT with exit 0."""
        bg = self.start(line, args)
        bg.wait_for(r"\S", COMMAND_TIMEOUT)
        time.sleep(1.0)
        bg.proc.send_signal(signal.SIGINT)
        try:
            code = bg.proc.wait(60)
        except subprocess.TimeoutExpired:
            bg.stacks_then_kill()
            code = bg.proc.returncode
        self.background.remove(bg)
        if code != 0:
            raise CheckFailed(f"`{line}` exited {code} after SIGINT:\n{bg.tail()}")
        self.say(f"ok    {line}    [{bg.out[0].strip()[:100]}]")

    def run_consumer(self, line: str, args: list[str]) -> None:
        """``rmqrun run``: started, consuming, its group's lag down to 0, then SIGTERM -> exit 0.

        Without ``--group`` on the line (a ``--config`` file names it) the group is read from
        the run's own "consuming ... as group G" line."""
        bg = self.start(line, args)
        consuming = bg.wait_for(r"\| consuming .* as group ", COMMAND_TIMEOUT)
        group = args[args.index("--group") + 1] if "--group" in args else \
            consuming.split(" as group ", 1)[1].split()[0]
        deadline = time.monotonic() + COMMAND_TIMEOUT
        lag = None
        while time.monotonic() < deadline:
            lag = self.group_lag(group)
            if lag == 0:
                break
            if bg.proc.poll() is not None:
                break
            time.sleep(0.5)
        if lag != 0:
            raise CheckFailed(f"`{line}`: group {group} still has lag {lag} (exit code {bg.proc.poll()}):\n"
                              f"{bg.tail()}")
        code = bg.stop()
        self.background.remove(bg)
        if code != 0:
            raise CheckFailed(f"`{line}` exited {code} after SIGTERM:\n{bg.tail()}")
        consumed = [ln for ln in bg.out if "stopped:" in ln]
        self.say(f"ok    {line}    [{consumed[-1].split('| ')[-1].strip() if consumed else 'stopped'}]")

    def group_lag(self, group: str) -> int | None:
        proc = subprocess.run(["rmqrun", "status", "--group", group, "--json"], cwd=self.checkout, env=self.env,
                              capture_output=True, text=True, timeout=COMMAND_TIMEOUT)
        if proc.returncode != 0:
            return None
        lags = [q.get("lag") for q in json.loads(proc.stdout).get("queues", [])]
        if not lags or any(lag is None for lag in lags):  # a queue the group has no offset for yet
            return None
        return sum(int(lag) for lag in lags)

    def close(self) -> list[str]:
        """Stop what still runs (the broker); returns problems (a non-zero exit)."""
        problems = []
        for bg in reversed(self.background):
            code = bg.stop()
            if code != 0:
                problems.append(f"`{bg.line}` exited {code} after SIGTERM:\n{bg.tail()}")
            else:
                self.say(f"ok    stopped `{bg.line}`")
        self.background.clear()
        return problems


def free_ports(count: int) -> list[int]:
    """``count`` different ports nothing listens on now: every probe socket stays bound until all are picked,
    since the kernel may hand a port out again once its probe is closed (and a broker given one port for both
    its name server and its broker fails to bind the second)."""
    probes = [socket.socket() for _ in range(count)]
    try:
        for probe in probes:
            probe.bind(("127.0.0.1", 0))
        return [int(probe.getsockname()[1]) for probe in probes]
    finally:
        for probe in probes:
            probe.close()


# --------------------------------------------------------------------------- the steps

def checkout(dest: Path) -> Path:
    """The working tree's files (tracked or trackable), as a fresh clone would have them."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, check=True,
                           capture_output=True).stdout.decode().split("\0")
    for rel in filter(None, files):
        src = REPO / rel
        if not src.is_file():  # deleted but not yet committed
            continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)
    return dest


def quick_start(readme: str, co: Path, log: bool) -> Path:
    block = code_blocks(section(readme, "Quick start"), "sh")
    if not block:
        raise CheckFailed("the Quick start section has no sh block")
    script = block[0]
    if log:
        print(f"quick start in {co}:\n{script.strip()}", flush=True)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "NAMESRV_ADDR")
           and not k.startswith("RMQRUN_")}
    proc = subprocess.run(["bash", "-e", "-c", script], cwd=co, env=env, capture_output=True, text=True,
                          timeout=1800)
    if proc.returncode != 0:
        raise CheckFailed(f"quick start exited {proc.returncode}:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
    summary = [ln for ln in proc.stdout.splitlines() if "messages handled in" in ln]
    if not summary:
        raise CheckFailed(f"quick start: the demo printed no summary:\n{proc.stdout[-3000:]}")
    if log:
        print(f"ok    quick start    [{summary[-1].strip()}]", flush=True)
    return co / ".venv" / "bin"


def using_it(readme: str, co: Path, venv_bin: Path, log: bool) -> None:
    text = section(readme, "Using it")
    handler = next((b for b in code_blocks(text, "python") if b.startswith("# myapp/handlers.py")), None)
    if handler is None:
        raise CheckFailed("the Using it section shows no handler block starting '# myapp/handlers.py'")
    (co / "myapp").mkdir(exist_ok=True)
    (co / "myapp" / "handlers.py").write_text(handler)
    runner = Runner(co, venv_bin, log)
    try:
        for block in code_blocks(text, "sh"):
            for line in commands(block):
                runner.run_line(line)
    finally:
        problems = runner.close()
    if problems:
        raise CheckFailed("\n".join(problems))


def _terminated(signum: int, frame: object) -> None:
    """SIGTERM (a caller's timeout): unwind, so the ``finally`` blocks stop the broker and runs started."""
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _terminated)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--readme", type=Path, default=REPO / "README.md")
    parser.add_argument("--venv", type=Path, help="use this venv; skip the quick start")
    parser.add_argument("--workdir", type=Path, help="where to make the checkout (default: a temporary directory)")
    parser.add_argument("--keep", action="store_true", help="keep the checkout")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    readme = args.readme.read_text(encoding="utf-8")
    work = args.workdir or Path(tempfile.mkdtemp(prefix="rmqrun-readme-"))
    co = checkout(work / "rmqrun")
    log = not args.quiet
    try:
        if args.venv is not None:
            venv_bin = args.venv.resolve() / "bin"
            if not (venv_bin / "rmqrun").exists():
                raise CheckFailed(f"--venv {args.venv}: no bin/rmqrun in it")
        else:
            venv_bin = quick_start(readme, co, log)
        using_it(readme, co, venv_bin, log)
    except CheckFailed as exc:
        print(f"FAIL  {exc}", file=sys.stderr, flush=True)
        return 1
    except subprocess.TimeoutExpired as exc:
        print(f"FAIL  `{' '.join(map(str, exc.cmd))}` took longer than {exc.timeout:g} s", file=sys.stderr)
        return 1
    finally:
        if not args.keep and args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    if log:
        print("README commands: all ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
