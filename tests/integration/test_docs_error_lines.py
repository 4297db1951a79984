"""The error lines quoted in docs/troubleshooting.md are what rmqrun prints today.

Every ``$ rmqrun ...`` line of the page followed by an ``rmqrun: error: ...`` line is run
(in a directory of its own, no ``RMQRUN_*`` inherited, ``NAMESRV_ADDR`` a closed port) when it needs
no cluster: the settings and option errors, refused before anything is contacted. Those
quoting an address or a data directory of the run the page was written from need that
run's broker and are left to the page's own account of how they were produced.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "troubleshooting.md"
NEEDS_A_CLUSTER = re.compile(r"127\.0\.0\.1|data directory|NoSuchGroup|already exists|online")


def quoted_errors() -> list[tuple[str, str]]:
    lines = PAGE.read_text().splitlines()
    pairs = []
    for cmd, out in zip(lines, lines[1:]):
        if cmd.startswith("$ rmqrun ") and out.startswith("rmqrun: error: ") and "..." not in cmd:
            pairs.append((cmd[2:], out))
    return pairs


OFFLINE = [(c, o) for c, o in quoted_errors() if not NEEDS_A_CLUSTER.search(c + o)]


def test_the_page_quotes_enough_offline_errors_to_check() -> None:
    assert len(OFFLINE) >= 4, OFFLINE


@pytest.mark.parametrize(("command", "line"), OFFLINE, ids=[c[:60] for c, _ in OFFLINE])
def test_quoted_error_line_is_printed(command: str, line: str, tmp_path: Path) -> None:
    args = shlex.split(command)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RMQRUN_")}
    env["NAMESRV_ADDR"] = "127.0.0.1:1"  # nobody listens: these errors come before anything is contacted
    bin_dir = Path(sys.executable).parent
    proc = subprocess.run([str(bin_dir / args[0]), *args[1:]], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == line, (command, proc.stderr)
