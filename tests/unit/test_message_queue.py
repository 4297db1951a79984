"""MessageQueue keeps its hash made once: the same hash, equality and fields as the plain frozen dataclass,
and a pickled queue hashes as the receiving process's own (str hashes differ between processes)."""

from __future__ import annotations

import copy
import dataclasses
import os
import pickle
import subprocess
import sys

from rmqrun.model import MessageQueue


def test_the_hash_is_the_fields_hash_and_the_fields_are_the_three() -> None:
    mq = MessageQueue("T", "broker-a", 3)
    assert hash(mq) == hash(("T", "broker-a", 3))
    assert mq == MessageQueue("T", "broker-a", 3) and hash(mq) == hash(MessageQueue("T", "broker-a", 3))
    assert mq != MessageQueue("T", "broker-a", 4)
    assert [f.name for f in dataclasses.fields(mq)] == ["topic", "broker_name", "queue_id"]
    assert dataclasses.asdict(mq) == {"topic": "T", "broker_name": "broker-a", "queue_id": 3}
    moved = dataclasses.replace(mq, queue_id=4)
    assert hash(moved) == hash(("T", "broker-a", 4))
    assert copy.deepcopy(mq) == mq and hash(copy.copy(mq)) == hash(mq)
    try:
        mq.queue_id = 5  # type: ignore[misc]
    except dataclasses.FrozenInstanceError:
        pass
    else:
        raise AssertionError("a MessageQueue must stay frozen")


def test_a_pickled_queue_is_found_by_its_equal_in_another_process() -> None:
    mqs = [MessageQueue("Orders", "broker-a", i) for i in range(4)]
    code = ("import pickle, sys\n"
            "from rmqrun.model import MessageQueue\n"
            "got = pickle.loads(sys.stdin.buffer.read())\n"
            "table = {MessageQueue('Orders', 'broker-a', i): i for i in range(4)}\n"
            "print(','.join(str(table[mq]) for mq in got))\n")
    for seed in ("1", "2"):  # two hash seeds, neither this process's
        out = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(mqs), capture_output=True,
                             env={**os.environ, "PYTHONHASHSEED": seed}, check=True, timeout=60)
        assert out.stdout.decode().strip() == "0,1,2,3"
