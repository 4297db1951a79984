"""The pieces of ``rmqrun spark`` that need neither a broker nor a JVM: results per call, failure files,
``--from`` / ``--to`` parsing, and which module files are shipped to the executors."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import rmqrun
from rmqrun.errors import ConfigError
from rmqrun.model import Message
from rmqrun.spark import failures
from rmqrun.spark.backfill import FailedMessage, RangeReport
from rmqrun.spark.shipping import files_to_ship
from rmqrun.spark.task import _TimeLimit, handle_chunk
from rmqrun.handler.loading import Handler
from rmqrun.cli.spark.command import parse_bound


def _msgs(n: int) -> list[Message]:
    return [Message(topic="T", body=f"b{i}".encode(), properties={"TAGS": "A", "k": str(i)}, msg_id=f"id{i}",
                    broker_name="broker-a", queue_id=1, queue_offset=10 + i, store_timestamp=1_700_000_000_000 + i)
            for i in range(n)]


def _run(fn, msgs: list[Message], *, is_batch: bool = False, keep: bool = True) -> RangeReport:  # type: ignore[no-untyped-def]
    report = RangeReport(0, "T", "broker-a", 1, 10, 10 + len(msgs))
    with _TimeLimit(0) as limit:
        handle_chunk(Handler("m:f", fn, is_batch), msgs, report, limit, keep)
    return report


def test_results_map_like_rmqrun_run() -> None:
    ok = _run(lambda m: None, _msgs(1))
    assert (ok.handled, ok.succeeded, ok.failed, ok.results) == (1, 1, 0, {"success": 1})

    def boom(m: Message) -> None:
        raise KeyError("x")
    r = _run(boom, _msgs(1))
    assert (r.failed, r.results, r.failures[0].reason) == (1, {"raised KeyError": 1}, "raised KeyError: 'x'")

    r = _run(lambda m: rmqrun.ReconsumeLater(delay_level=-1), _msgs(1))
    assert r.results == {"ReconsumeLater": 1} and r.failures[0].delay_level == -1

    r = _run(lambda m: rmqrun.ReconsumeLater, _msgs(1))
    assert r.results == {"bad result": 1} and "return an instance: ReconsumeLater()" in r.failures[0].reason

    # returning normally is success whatever the value, as under rmqrun run; False alone is "not done"
    for value in (True, "yes", 0, 7):
        r = _run(lambda m, v=value: v, _msgs(1))
        assert (r.succeeded, r.failed, r.results) == (1, 0, {"success": 1}), value
    r = _run(lambda m: False, _msgs(1))
    assert r.results == {"returned False": 1} and r.failures[0].reason == "returned False"

    r = _run(lambda ms: rmqrun.AckIndex(1), _msgs(4), is_batch=True)
    assert (r.succeeded, r.failed) == (2, 2) and [f.queue_offset for f in r.failures] == [12, 13]
    assert r.results == {"success": 2, "AckIndex: not acked": 2}

    r = _run(lambda m: rmqrun.ReconsumeLater(), _msgs(1), keep=False)
    assert r.failed == 1 and r.failures == [] and r.sample_reasons, "counted, not kept, without a destination"


def test_failure_files_round_trip(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    rows = [FailedMessage.of(m, f"reason {i}") for i, m in enumerate(_msgs(2))]
    rows[1].body = b"\xff\x00"
    assert failures.write(str(tmp_path / "f.jsonl"), rows) == 2
    lines = [json.loads(x) for x in (tmp_path / "f.jsonl").read_text().splitlines()]
    assert lines[0]["body"] == "b0" and lines[0]["body_encoding"] == "utf-8" and lines[0]["reason"] == "reason 0"
    assert lines[1]["body"] == "/wA=" and lines[1]["body_encoding"] == "base64"
    assert lines[0]["properties"] == {"TAGS": "A", "k": "0"} and lines[0]["tags"] == "A"

    assert failures.write(str(tmp_path / "f.parquet"), rows) == 2
    table = pq.read_table(tmp_path / "f.parquet")
    got = table.to_pylist()
    assert [r["body"] for r in got] == [b"b0", b"\xff\x00"] and dict(got[0]["properties"])["k"] == "0"
    assert str(table.schema.field("store_timestamp").type) == "timestamp[ms]"
    assert failures.write(str(tmp_path / "empty.parquet"), []) == 0 and pq.read_table(tmp_path / "empty.parquet").num_rows == 0

    assert "is a directory" in (failures.check_path(str(tmp_path)) or "")
    assert "does not exist" in (failures.check_path(str(tmp_path / "no" / "f.jsonl")) or "")
    assert failures.check_path(str(tmp_path / "new.jsonl")) is None


def test_parse_bound() -> None:
    kw = dict(allow_latest=False, allow_earliest=True, allow_offset=True)
    assert parse_bound("earliest", "--from", "T", **kw).kind == "earliest"
    assert (parse_bound("42", "--from", "T", **kw).kind, parse_bound("42", "--from", "T", **kw).value) == ("offset", 42)
    assert parse_bound("1732435200000", "--from", "T", **kw).kind == "time"
    assert parse_bound("2024-11-24T08:00:00Z", "--from", "T", **kw).value == 1732435200000
    spec = parse_bound('{"T": {"broker-a:1": 7}}', "--from", "T", **kw).spec
    assert [(mq.queue_id, off) for mq, off in spec.offsets] == [(1, 7)]
    with pytest.raises(ConfigError, match="--from 'latest'"):
        parse_bound("latest", "--from", "T", **kw)
    with pytest.raises(ConfigError, match=r"^--to '42' is not latest, a time"):
        parse_bound("42", "--to", "T", allow_latest=True, allow_earliest=False, allow_offset=False)
    with pytest.raises(ConfigError, match=r"^--to: queue key 'x' is not"):
        parse_bound('{"T": {"x": 1}}', "--to", "T", allow_latest=True, allow_earliest=False, allow_offset=False)


def test_shipping_a_module_and_a_package_but_not_what_is_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "solo_handler_mod.py").write_text("def handle(m): pass\n")
    pkg = tmp_path / "pkg_handler_mod" / "sub"
    pkg.mkdir(parents=True)
    (pkg.parent / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "h.py").write_text("def handle(m): pass\n")
    (pkg / "__pycache__").mkdir()
    (pkg / "__pycache__" / "h.cpython-311.pyc").write_bytes(b"x")
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "out"
    out.mkdir()
    shipped = files_to_ship(["solo_handler_mod:handle", "pkg_handler_mod.sub.h:handle", "pkg_handler_mod.sub.h:x",
                             "rmqrun.handler.loading:batch", "json:loads", None], out)
    assert shipped == [str(tmp_path / "solo_handler_mod.py"), str(out / "pkg_handler_mod.zip")]
    import zipfile
    names = sorted(zipfile.ZipFile(out / "pkg_handler_mod.zip").namelist())
    assert names == ["pkg_handler_mod/__init__.py", "pkg_handler_mod/sub/__init__.py", "pkg_handler_mod/sub/h.py"]
    for mod in ("solo_handler_mod", "pkg_handler_mod", "pkg_handler_mod.sub", "pkg_handler_mod.sub.h"):
        sys.modules.pop(mod, None)


def test_plan_splits_into_at_least_n_pieces_none_longer_than_the_cap() -> None:
    from rmqrun.model import MessageQueue
    from rmqrun.spark.plan import Plan

    qs = [MessageQueue("T", "broker-a", i) for i in range(4)]
    plan = Plan(qs, {q: 5 for q in qs}, {q: (120_005 if q.queue_id == 0 else 15 if q.queue_id < 3 else 5) for q in qs})
    assert plan.total == 120_020
    pieces = plan.ranges(2)
    assert [(p.queue_id, p.size) for p in pieces] == [(0, 40_000)] * 3 + [(1, 10), (2, 10)], "the empty queue has none"
    assert sum(p.size for p in plan.ranges(12)) == 120_020 and len(plan.ranges(12)) >= 12
    covered = sorted((p.queue_id, o) for p in plan.ranges(12) for o in range(p.start, p.end))
    assert covered == sorted((q.queue_id, o) for q in qs for o in range(5, plan.end[q])), "every offset once"
