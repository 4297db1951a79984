"""``rmqrun read``'s pure parts: the --from forms and the text / JSON lines."""

from __future__ import annotations

import base64
import json
from datetime import datetime, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqrun.cli.read.format import (
    PREVIEW_CHARS, StartAt, body_record, escape, json_line, length_prefixed_record, parse_from, parse_to,
    preview, text_line,
)
from rmqrun.model import Message
from rmqrun.time_text import iso_ms


@pytest.mark.parametrize("text, expected", [
    ("earliest", StartAt("earliest")),
    (" LATEST ", StartAt("latest")),
    ("0", StartAt("offset", 0)),
    ("42", StartAt("offset", 42)),
    ("999999999999", StartAt("offset", 999_999_999_999)),
    ("1732435200000", StartAt("time", 1_732_435_200_000)),
    ("offset:1732435200000", StartAt("offset", 1_732_435_200_000)),
    ("time:5", StartAt("time", 5)),
    ("2024-11-24T08:00:00Z", StartAt("time", 1_732_435_200_000)),
    ("2024-11-24T09:00:00.250+01:00", StartAt("time", 1_732_435_200_250)),
    ("time:2024-11-24T08:00:00Z", StartAt("time", 1_732_435_200_000)),
])
def test_from_forms(text: str, expected: StartAt) -> None:
    assert parse_from(text) == expected


def test_from_naive_iso_is_local_time() -> None:
    local = datetime(2024, 11, 24, 8, 0, 0).astimezone()
    assert parse_from("2024-11-24T08:00:00") == StartAt("time", int(local.timestamp() * 1000))


@pytest.mark.parametrize("text", ["", "yesterday", "-3", "offset:abc", "offset:2024-11-24", "1.5", "time:"])
def test_bad_from_says_what_is_accepted(text: str) -> None:
    with pytest.raises(ValueError, match="is not earliest, latest, an offset"):
        parse_from(text)


def test_escape_keeps_one_message_on_one_line() -> None:
    assert escape("a\nb\tc\\d\x00é€") == "a\\nb\\tc\\\\d\\x00é€"
    assert preview(b"ok \xff\xfe end") == "ok \\xff\\xfe end"
    long = preview(b"x" * 500, limit=10)
    assert long == "xxxxxxxxxx… (500 bytes)"


def _msg(body: bytes) -> Message:
    return Message(topic="T", body=body, properties={"TAGS": "A", "KEYS": "k 1", "UNIQ_KEY": "ID1", "idx": "3"},
                   msg_id="ID1", offset_msg_id="OFF1", broker_name="broker-a", queue_id=2, queue_offset=7,
                   store_timestamp=1_732_435_200_123, born_timestamp=1_732_435_200_100)


def test_text_line() -> None:
    line = text_line(_msg(b"hello\nworld"))
    assert line == ("broker-a:2@7 id=ID1 tags=A keys=k 1 stored=2024-11-24T08:00:00.123Z "
                    "body=hello\\nworld")
    assert "\n" not in text_line(_msg(b"\x00\x01\n" * 100))
    no_tags = Message(topic="T", body=b"")
    assert "tags=- keys=-" in text_line(no_tags)


def test_json_line_utf8_and_base64() -> None:
    record = json.loads(json_line(_msg("héllo".encode())))
    assert record["body"] == "héllo" and record["body_encoding"] == "utf-8"
    assert (record["topic"], record["broker"], record["queue_id"], record["queue_offset"]) == ("T", "broker-a", 2, 7)
    assert record["msg_id"] == "ID1" and record["offset_msg_id"] == "OFF1"
    assert record["tags"] == "A" and record["keys"] == "k 1" and record["properties"]["idx"] == "3"
    assert record["store_timestamp"] == 1_732_435_200_123 and record["born_timestamp"] == 1_732_435_200_100
    raw = bytes(range(256))
    binary = json.loads(json_line(_msg(raw)))
    assert binary["body_encoding"] == "base64" and base64.b64decode(binary["body"]) == raw
    assert binary["body_size"] == 256


def test_iso_ms() -> None:
    assert iso_ms(0) == "1970-01-01T00:00:00.000Z"
    when = datetime(2024, 11, 24, 8, 0, 0, 5000, tzinfo=timezone.utc)
    assert iso_ms(int(when.timestamp() * 1000)) == "2024-11-24T08:00:00.005Z"
    assert iso_ms(-1) == "1969-12-31T23:59:59.999Z"


# ---------------------------------------------------------------- --to, raw bodies, the cut-then-escape preview

@pytest.mark.parametrize("text, expected", [
    ("latest", StartAt("latest")),
    ("42", StartAt("offset", 42)),
    ("offset:7", StartAt("offset", 7)),
    ("1732435200000", StartAt("time", 1_732_435_200_000)),
    ("2024-11-24T08:00:00Z", StartAt("time", 1_732_435_200_000)),
])
def test_to_forms(text: str, expected: StartAt) -> None:
    assert parse_to(text) == expected


@pytest.mark.parametrize("text", ["earliest", "", "soon", "-1"])
def test_bad_to_says_what_is_accepted(text: str) -> None:
    with pytest.raises(ValueError, match=r"^--to .* is not latest, an offset"):
        parse_to(text)


def test_raw_body_records() -> None:
    msg = _msg(b"a\nb\x00")
    assert body_record(msg) == b"a\nb\x00\n"
    assert length_prefixed_record(msg) == b"\x00\x00\x00\x04a\nb\x00"
    assert length_prefixed_record(_msg(b"")) == b"\x00\x00\x00\x00"


def _escape_all_then_cut(body: bytes, limit: int) -> str:
    """What preview printed before it cut first: the whole body escaped, then cut."""
    text = escape(body.decode("utf-8", errors="surrogateescape"))
    return f"{text[:limit]}… ({len(body)} bytes)" if len(text) > limit else text


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.binary(max_size=200), st.text(max_size=80).map(lambda t: t.encode("utf-8", "surrogatepass"))),
       st.integers(min_value=0, max_value=40))
def test_cutting_first_prints_exactly_what_escaping_first_did(body: bytes, limit: int) -> None:
    assert preview(body, limit) == _escape_all_then_cut(body, limit)


@pytest.mark.parametrize("body", [b"\x00" * (1 << 20), "€".encode() * (1 << 18), b"\xff" * (1 << 20)])
def test_a_long_body_is_cut_before_it_is_escaped(body: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    import rmqrun.cli.read.format as rf
    seen: list[int] = []
    real = rf.escape
    monkeypatch.setattr(rf, "escape", lambda text: (seen.append(len(text)), real(text))[1])
    assert preview(body).endswith(f"… ({len(body)} bytes)")
    assert seen == [PREVIEW_CHARS + 1]  # not the million characters of the body
    assert preview(body) == _escape_all_then_cut(body, PREVIEW_CHARS)
