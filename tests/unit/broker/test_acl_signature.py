"""The broker's signature check against vectors computed here and against real 4.9.8 mqadmin frames."""

from __future__ import annotations

import base64
import hashlib
import hmac
import pytest

from rmqrun.broker.acl import signature
from rmqrun.remoting.frame import decode_with_prefix
from tests.captures import CapturedFrame, load, requires_captures

SECRET = "12345678"


def _vector(fields: dict[str, str], body: bytes, secret: str) -> str:
    # The definition, spelled out: values ordered by field name, concatenated, then the body.
    names = sorted(k for k in fields if k != "Signature")
    content = "".join(fields[k] for k in names).encode() + body
    return base64.b64encode(hmac.new(secret.encode(), content, hashlib.sha1).digest()).decode()


def test_known_vector() -> None:
    fields = {"b": "Orders", "a": "PG", "AccessKey": "rocketmq2", "SecurityToken": "tok", "c": "TBW102"}
    body = b"hello \xe2\x82\xac"
    # "AccessKey" < "SecurityToken" < "a" < "b" < "c" in Java's (and ASCII) order
    content = b"rocketmq2" + b"tok" + b"PG" + b"Orders" + b"TBW102" + body
    expected = base64.b64encode(hmac.new(SECRET.encode(), content, hashlib.sha1).digest()).decode()
    assert expected == _vector(fields, body, SECRET)
    assert signature.compute(signature.signed_content(fields, body), SECRET) == expected
    assert signature.matches({**fields, "Signature": expected}, body, SECRET)


@pytest.mark.parametrize("change", ["secret", "field", "body", "missing", "extra-field"])
def test_any_change_breaks_the_signature(change: str) -> None:
    fields = {"AccessKey": "rocketmq2", "topic": "T", "queueId": "3"}
    body = b"payload"
    fields["Signature"] = _vector(fields, body, SECRET)
    secret = SECRET
    if change == "secret":
        secret = "12345679"
    elif change == "field":
        fields["queueId"] = "4"
    elif change == "body":
        body = b"payloaD"
    elif change == "missing":
        del fields["Signature"]
    else:
        fields["extra"] = "x"
    assert not signature.matches(fields, body, secret)


def test_names_sort_as_java_strings() -> None:
    # U+FF21 (BMP) sorts after U+10000 (a surrogate pair, 0xD800...) in Java, before it by code point.
    fields = {"AccessKey": "k", "\uff21": "1", "\U00010000": "2"}
    assert signature.signed_content(fields, None) == b"k21"


def _captured_signed_requests() -> list[CapturedFrame]:
    return [f for f in load("g") if f["kind"] == "request" and f["dir"] == "c2s"
            and "AccessKey" in (f["header"].get("extFields") or {})]


@requires_captures
def test_real_mqadmin_frames_pass_with_the_tools_secret() -> None:
    frames = _captured_signed_requests()
    assert len(frames) >= 90
    for f in frames:
        cmd = decode_with_prefix(f.raw)
        assert signature.matches(cmd.ext_fields, cmd.body, SECRET), (f["seq"], f["code_name"])
        assert not signature.matches(cmd.ext_fields, cmd.body, "87654321"), f["seq"]


def test_unique_key_query_accepted_signed_either_way() -> None:
    # mqadmin signs _UNIQUE_KEY_QUERY (captured seq 381); a 4.9.8 broker leaves it out of its
    # content (apache/rocketmq#5310). Both forms pass here; a third value does not.
    fields = {"AccessKey": "rocketmq2", "topic": "T", "_UNIQUE_KEY_QUERY": "false"}
    without = {k: v for k, v in fields.items() if k != "_UNIQUE_KEY_QUERY"}
    assert signature.matches({**fields, "Signature": _vector(fields, b"", SECRET)}, b"", SECRET)
    assert signature.matches({**fields, "Signature": _vector(without, b"", SECRET)}, b"", SECRET)
    assert not signature.matches({**fields, "Signature": _vector({**fields, "topic": "U"}, b"", SECRET)}, b"",
                                 SECRET)
