"""The worker's log plumbing in one process: standard logging and the standard streams into loguru.

Handlers log with ``logging``, ``print`` or ``sys.stderr.write``; each line must
become one record at the right level, even with odd levels, a broken format string
or text written without a newline, and installing the routing twice must not
double every record.
"""

from __future__ import annotations

import io
import logging
from typing import Any, Iterator

import pytest
from loguru import logger

from rmqrun.worker import logs


@pytest.fixture
def records() -> Iterator[list[Any]]:
    got: list[Any] = []
    sink = logger.add(lambda m: got.append(m.record), level="DEBUG", format="{message}")
    try:
        yield got
    finally:
        logger.remove(sink)
        root = logging.getLogger()
        for h in list(root.handlers):
            if isinstance(h, logs.InterceptHandler):
                root.removeHandler(h)


def test_standard_logging_reaches_loguru_once_with_its_level_and_name(records: list[Any]) -> None:
    logs.route_std_logging("DEBUG")
    logs.route_std_logging("DEBUG")  # idempotent: one InterceptHandler, one record per call
    assert sum(isinstance(h, logs.InterceptHandler) for h in logging.getLogger().handlers) == 1
    lib = logging.getLogger("thirdparty.lib")
    lib.setLevel(logging.DEBUG)
    lib.warning("disk at %d%%", 91)
    logging.addLevelName(25, "NOTICE")  # a level loguru does not know: kept by number
    lib.log(25, "custom level")
    # the handler's bug: the line is kept, not lost (handed to the handler directly, as pytest's own
    # capture handler would raise on it first)
    bad = lib.makeRecord("thirdparty.lib", logging.ERROR, __file__, 1, "broken %d format", ("not-a-number",), None)
    logs.InterceptHandler().emit(bad)
    mine = [r for r in records if r["extra"].get("logger") == "thirdparty.lib"]
    assert [(r["level"].name, r["message"]) for r in mine[:2]] == [("WARNING", "disk at 91%"),
                                                                   ("Level 25", "custom level")]
    assert mine[2]["level"].name == "ERROR"
    assert mine[2]["message"] == "'broken %d format' % ('not-a-number',)"
    assert len(mine) == 3


def test_a_line_writer_makes_one_record_per_line(records: list[Any]) -> None:
    original = io.StringIO()
    out = logs.LineWriter("stdout", "INFO", original)  # type: ignore[arg-type]
    assert out.writable() and not out.isatty() and out.encoding == "utf-8"
    out.write("par")
    out.write("tial")
    assert not [r for r in records if r["extra"].get("stream") == "stdout"], "no record before the newline"
    out.write(" line\r\nsecond\n\nthird")
    out.flush()
    out.flush()  # nothing left: no empty record
    lines = [r["message"] for r in records if r["extra"].get("stream") == "stdout"]
    assert lines == ["partial line", "second", "third"]
    assert all(r["level"].name == "INFO" for r in records if r["extra"].get("stream") == "stdout")
    assert original.getvalue() == "", "lines go to the log, not to the original stream"


def test_a_line_writer_hands_bytes_and_the_descriptor_to_the_real_stream(tmp_path: Any) -> None:
    with open(tmp_path / "real", "w+b") as raw:
        text = io.TextIOWrapper(raw, encoding="utf-8")
        out = logs.LineWriter("stderr", "WARNING", text)  # type: ignore[arg-type]
        assert out.fileno() == raw.fileno()
        out.buffer.write(b"binary bypasses the log\n")
        out.buffer.flush()
        assert (tmp_path / "real").read_bytes() == b"binary bypasses the log\n"
