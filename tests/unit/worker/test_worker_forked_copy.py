"""A process the handler forks and that returns into the worker's code runs nothing and writes nothing there.

A process worker writes each result straight into the progress block it shares with
the supervisor (``progress.Writer.in_place``), through a view the call loop holds. A
copy of the worker that a handler forked and that then returns from the handler (or
raises out of it) must leave before it writes a byte of that block or calls the
handler again (``rmqrun/worker/guard.py``). Each case runs in a fresh interpreter, since
``guard.protect`` installs an at-fork hook for the rest of the process's life.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

SCENARIO = r"""
import json, os, socket, sys
from rmqrun.handler.loading import Handler
from rmqrun.pipe import progress as p
from rmqrun.pipe.wire import Batch, ConsumeMode, Done, FrameBuffer, encode_run
from rmqrun.pipe.worker_config import WorkerConfig
from rmqrun.remoting.message import encode_stored
from rmqrun.worker import guard
from rmqrun.worker.main import Worker

how = sys.argv[1]
mm = p.map_fd(p.create_fd())
sup, mine = socket.socketpair()
writer = p.Writer(mm)
calls_r, calls_w = os.pipe()
seen = {}

def handle(msg):
    os.write(calls_w, b"%d %d\n" % (os.getpid(), msg.queue_offset))
    if msg.queue_offset == 0:
        pid = os.fork()
        if pid == 0:  # the forked copy goes back into the worker's code
            if how == "raise":
                raise ValueError("from the copy")
            return None
        seen["copy_exit"] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        got = p.read(mm)
        seen["block"] = [got.done, got.in_call, got.call_start, mm[p.STATUS_AT], mm[p.STATUS_AT + 1]]
    return None

worker = Worker(WorkerConfig("t:h", batch_size=1, time_limit=900.0), 1, mine, writer)
worker.handler = Handler("t:h", handle, False)
guard.protect(1, "t:h", 0, mine, writer)
records = [bytes(encode_stored(topic="T", body=b"b", queue_offset=i)) for i in range(3)]
sup.sendall(b"".join(bytes(x) for x in encode_run(Batch(1, "q", ConsumeMode.CONCURRENT, "b", records, count=3))))
worker._run_batch(worker._next_frame())
worker.pipe.flush()
frames, done = FrameBuffer(), None
while not isinstance(done, Done):
    while not frames.has_frame():
        frames.feed(sup.recv(1 << 16))
    done = frames.next()
os.close(calls_w)
calls = [tuple(map(int, line.split())) for line in os.read(calls_r, 1 << 16).decode().splitlines()]
print(json.dumps({"me": os.getpid(), "calls": calls, "statuses": list(done.statuses), **seen}))
"""


@pytest.mark.parametrize("how", ["return", "raise"])
def test_a_forked_copy_back_from_the_handler_leaves_before_touching_the_block(how: str) -> None:
    out = subprocess.run([sys.executable, "-c", SCENARIO, how], cwd=ROOT, capture_output=True, text=True,
                         timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.splitlines()[-1])
    me = got["me"]
    assert got["calls"] == [[me, 0], [me, 1], [me, 2]], "the copy called the handler"
    assert got["copy_exit"] == 0 and "returned into the worker's code" in out.stderr
    # while the worker was still in call 0: nothing of the copy's in the block
    assert got["block"] == [0, True, 0, 5, 5], "the copy wrote the block (5: NOT_RUN)"
    assert got["statuses"] == [0, 0, 0]
