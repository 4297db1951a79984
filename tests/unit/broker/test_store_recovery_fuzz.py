"""Property: after cutting the commit log anywhere (or flipping a body byte), recovery keeps
exactly the records wholly before the damage, and consume queues match them."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmqrun.broker.store import MessageStore
from tests.unit.store_records import assert_consistent, build_record, crash, small_config

QUEUES = [("A", 0), ("A", 1), ("B", 0)]


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> tuple[Path, list]:
    """One store written once (crashed, so the checkpoint is old); each example copies it."""
    path = tmp_path_factory.mktemp("template")
    store = MessageStore(path, small_config(checkpoint_interval_ms=60_000)).open()
    results = []
    for i in range(240):
        topic, qid = QUEUES[i % 3 if i % 7 else 0]
        body = b"r%03d:" % i + b"#" * (i * 13 % 300)
        results.append((topic, qid, store.put(topic, qid, build_record(topic, qid, body, tags="t"), 0), body))
    crash(store)
    return path, results


def _copy(src: Path, dst: Path) -> None:
    shutil.copytree(src, dst)
    (dst / "lock").unlink(missing_ok=True)


def _expected(results, damaged_at: int) -> dict:
    out: dict = {}
    for topic, qid, r, body in results:
        if r.end_offset <= damaged_at:
            out.setdefault((topic, qid), []).append(body)
    return out


def _check(path: Path, results, damaged_at: int) -> None:
    with MessageStore(path, small_config()) as s:
        assert assert_consistent(s) == _expected(results, damaged_at)
        # And the store keeps working afterwards.
        r = s.put("A", 0, build_record("A", 0, b"after"), 0)
        assert r.queue_offset == s.max_offset("A", 0) - 1
    with MessageStore(path, small_config()) as s:
        assert assert_consistent(s)[("A", 0)][-1] == b"after"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(frac=st.floats(0, 1), clean_close=st.booleans())
def test_cut_anywhere(template, tmp_path_factory, frac, clean_close) -> None:
    src, results = template
    path = tmp_path_factory.mktemp("cut") / "s"
    _copy(src, path)
    if clean_close:  # a fresh checkpoint at the end: the cut lands in "trusted" data
        MessageStore(path, small_config()).open().close()
    end = results[-1][2].end_offset
    cut = int(frac * end)
    segs = sorted((path / "commitlog").iterdir())
    for seg in segs:
        start = int(seg.name)
        if start >= cut and not (start == cut == 0):
            seg.unlink()
        elif start <= cut < start + 4096:
            os.truncate(seg, min(cut - start, seg.stat().st_size))
    _check(path, results, cut)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(index=st.integers(0, 239), where=st.floats(0, 1))
def test_flip_a_body_byte(template, tmp_path_factory, index, where) -> None:
    src, results = template
    path = tmp_path_factory.mktemp("flip") / "s"
    _copy(src, path)
    (path / "checkpoint.json").unlink()  # otherwise old records are trusted, as designed
    _topic, _qid, r, body = results[index]
    body_start = r.end_offset - len(body) - 2 - 1 - len(_topic)  # body sits before topic and properties
    body_start -= len("TAGS\x01t".encode())
    pos = body_start + int(where * (len(body) - 1))
    seg = path / "commitlog" / f"{pos - pos % 4096:020d}"
    seg_bytes = seg.read_bytes()
    assert seg_bytes[body_start % 4096 : body_start % 4096 + len(body)] == body  # really the body
    with open(seg, "r+b") as f:
        f.seek(pos % 4096)
        byte = f.read(1)
        f.seek(pos % 4096)
        f.write(bytes([byte[0] ^ 0x5A]))
    _check(path, results, r.commit_log_offset)
