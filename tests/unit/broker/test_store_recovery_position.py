"""Recovery cuts a well-formed record that sits at the wrong position.

A record whose size, fields and body CRC are fine, and whose queue offset is the
next one expected, but whose PHYSICALOFFSET is not where it lies (a stale copy,
e.g. a block the file system replayed from a previous life of the file), must
end the valid log: only the position check can tell it apart from a real append.
"""

from __future__ import annotations

from tests.unit.store_records import build_record
from tests.unit.broker.test_store_recovery import check, last_segment, populate, reopen


def test_record_claiming_another_position_ends_the_log(tmp_path) -> None:
    results = populate(tmp_path, 30, queues=(("T", 0),), close=False)
    end = results[-1][2].end_offset
    rec = build_record("T", 0, b"stale")
    rec[20:28] = (30).to_bytes(8, "big")          # QUEUEOFFSET: the next one, so that check passes
    rec[28:36] = (end - 100).to_bytes(8, "big")   # PHYSICALOFFSET: not where it is written
    with open(last_segment(tmp_path), "ab") as f:
        f.write(rec)
    with reopen(tmp_path) as s:
        check(s, results, end)
        assert "PHYSICALOFFSET" in s.recovery.problem


def _rewrite_checkpoint(path, **changes) -> None:  # type: ignore[no-untyped-def]
    import json
    cp = json.loads((path / "checkpoint.json").read_text())
    cp.update(changes)
    (path / "checkpoint.json").write_text(json.dumps(cp))


def test_checkpoint_offset_inside_its_last_record_is_ignored(tmp_path) -> None:
    """A checkpoint whose offset is not the end of its last record is not trusted: full scan, nothing cut."""
    results = populate(tmp_path, 30, queues=(("T", 0),))
    end = results[-1][2].end_offset
    _rewrite_checkpoint(tmp_path, commitLogOffset=end - 10)
    with reopen(tmp_path) as s:
        check(s, results, end)
        assert not s.recovery.checkpoint_used
        assert any("not at" in note for note in s.recovery.notes), s.recovery.notes


def test_checkpoint_whose_last_record_is_corrupt_is_ignored(tmp_path) -> None:
    """The checkpoint's last record is re-validated: a torn body there is found and cut, never trusted."""
    results = populate(tmp_path, 30, queues=(("T", 0),))
    last = results[-1][2]
    with open(last_segment(tmp_path), "r+b") as f:
        start = last.commit_log_offset % 4096
        f.seek(start)
        at = start + f.read(last.size).index(results[-1][3])  # the body (topic and properties follow it)
        f.seek(at + 2)
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 0xFF]))
    with reopen(tmp_path) as s:
        assert not s.recovery.checkpoint_used
        check(s, results, last.commit_log_offset)
        assert "CRC" in (s.recovery.problem or "")
