"""The chaos suite's audit catches what it must: a loss, a skip in an orderly queue, an unexplained duplicate.

``scripts/chaos.py`` passing means something only if its audit fails on a bad
history; these feed it small hand-made histories.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))

from chaos_audit import Call, Fault, KindRow, Stored, audit_group, check_order, parse_calls, table  # noqa: E402


def ok(t: float, queue: int, offset: int, msg_id: str) -> Call:
    return Call("ok", t, 1, queue, offset, 0, msg_id, "-")


def stored(queue: int, offset: int, msg_id: str, t: float = 0.0) -> Stored:
    return Stored("T", queue, offset, msg_id, t, "-")


def rows() -> dict[str, KindRow]:
    return {k: KindRow() for k in ("none", "run_kill", "broker_kill")}


def test_record_lines_cut_by_a_kill_are_ignored() -> None:
    text = "ok 1.5 10 0 3 0 ID3 -\nok 1.6 10 0 4 0 ID4 -\nok 1.7 10 0\n"
    assert [c.offset for c in parse_calls(text)] == [3, 4]


def test_order_allows_a_rewind_but_not_a_skip() -> None:
    calls = [ok(1, 0, 0, "a"), ok(2, 0, 1, "b"), ok(3, 0, 2, "c"), ok(4, 0, 1, "b"), ok(5, 0, 2, "c"),
             ok(6, 0, 3, "d")]
    assert check_order(calls, {0: 0}) == []
    bad = check_order([ok(1, 0, 0, "a"), ok(2, 0, 2, "c")], {0: 0})
    assert len(bad) == 1 and "skipped 1..1" in bad[0][1]
    late_start = check_order([ok(1, 1, 5, "x")], {1: 0})
    assert len(late_start) == 1 and "skipped 0..4" in late_start[0][1]


def test_a_message_never_completed_is_lost_and_charged_to_the_fault_around_it() -> None:
    faults = [Fault("broker_kill", "", 10.0, 12.0, 20.0)]
    r = rows()
    a = audit_group("G", True, [ok(11, 0, 0, "a")], [stored(0, 0, "a", 9), stored(0, 1, "b", 15)], [], [],
                    {"a", "b"}, {"T:0": (2, 2)}, faults, r, {0: 0})
    assert len(a.lost) == 1 and "offset 1" in a.lost[0]
    assert r["broker_kill"].lost == 1


def test_an_acknowledged_send_missing_from_the_broker_is_lost() -> None:
    a = audit_group("G", False, [ok(1, 0, 0, "a")], [stored(0, 0, "a")], [], [], {"a", "ghost"}, {}, [], rows(),
                    {0: 0})
    assert a.lost == ["acknowledged send ghost is not in the broker"]


def test_duplicates_are_explained_only_by_a_fault_between_them() -> None:
    faults = [Fault("run_kill", "", 10.0, 11.0, 12.0)]
    r = rows()
    calls = [ok(5, 0, 0, "a"), ok(10.5, 0, 0, "a"),  # around the kill: explained
             ok(20, 0, 1, "b"), ok(21, 0, 1, "b")]  # no fault anywhere near: unexplained
    a = audit_group("G", False, calls, [stored(0, 0, "a"), stored(0, 1, "b")], [], [], set(), {}, faults, r, {0: 0})
    assert a.duplicates == 2 and len(a.unexplained_duplicates) == 1 and "msg b" in a.unexplained_duplicates[0]
    assert r["run_kill"].duplicates == 1 and r["none"].duplicates == 1


def test_retry_dlq_and_offsets_are_checked() -> None:
    a = audit_group("G", False, [ok(1, 0, 0, "a")], [stored(0, 0, "a")], [stored(0, 0, "r")], [stored(0, 0, "a")],
                    set(), {"T:0": (0, 1), "%RETRY%G:0": (1, 1)}, [], rows(), {0: 0})
    assert a.retry_unhandled and a.dlq and a.offsets_behind == ["T:0: committed 0, max 1"]


def test_table_has_a_row_per_kind_and_a_total() -> None:
    r = rows()
    r["run_kill"].injected, r["run_kill"].duplicates = 2, 7
    text = table(r, ["run_kill", "broker_kill"])
    assert "| run_kill | 2 | 0 | 0 | 0 | 7 |" in text and "| **total** | 2 | 0 | 0 | 0 | 7 |" in text
