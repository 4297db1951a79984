"""JSON as RocketMQ's fastjson writes it, which is not always JSON.

fastjson writes maps with integer keys unquoted (``{0:"127.0.0.1:10911"}``)
and maps keyed by objects with the object as the key
(``{{"brokerName":"b","queueId":0,"topic":"t"}:12}``). The Java side reads
both; so must we. :func:`loads` tries the standard parser first (the common
case, and fast) and falls back to a small tolerant parser.

Keys that are not strings come back as strings: a number as its decimal text,
an object as its canonical JSON text (sorted keys), which :func:`object_key`
turns back into a dict.
"""

from __future__ import annotations

import json
import re
from typing import Any

from rmqrun.remoting.errors import ProtocolError

_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?")
_scanstring = json.decoder.scanstring  # type: ignore[attr-defined]


def loads(data: bytes | str) -> Any:
    """Parse a fastjson body; raises :class:`ProtocolError` on anything unparseable."""
    try:
        text = bytes(data).decode("utf-8") if not isinstance(data, str) else data
    except UnicodeDecodeError as exc:
        raise ProtocolError(f"JSON body is not UTF-8: {exc}") from exc
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        value, end = _Parser(text).parse(0)
        end = _WS.match(text, end).end()
        if end != len(text):
            raise ProtocolError(f"trailing data at offset {end}")
        return value
    except RecursionError as exc:
        raise ProtocolError("JSON nested too deeply") from exc


def object_key(key: str) -> dict[str, Any]:
    """The object a non-string map key stood for (see the module docstring)."""
    return json.loads(key)


def dumps(obj: Any, *, unquoted_int_keys: bool = False) -> bytes:
    """Compact JSON; with ``unquoted_int_keys`` integer map keys are written bare, as
    fastjson does for clients too old to ask for standard JSON."""
    if not unquoted_int_keys:
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=_default).encode("utf-8")
    return _dump_bare(obj).encode("utf-8")


def _default(obj: Any) -> Any:
    to_json = getattr(obj, "to_json", None)
    if callable(to_json):
        return to_json()
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


def _dump_bare(obj: Any) -> str:
    if isinstance(obj, dict):
        items = []
        for k, v in obj.items():
            key = str(k) if isinstance(k, int) and not isinstance(k, bool) else json.dumps(str(k), ensure_ascii=False)
            items.append(f"{key}:{_dump_bare(v)}")
        return "{" + ",".join(items) + "}"
    if isinstance(obj, (list, tuple)):
        return "[" + ",".join(_dump_bare(v) for v in obj) + "]"
    if hasattr(obj, "to_json"):
        return _dump_bare(obj.to_json())
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


class _Parser:
    """Recursive descent over JSON plus bare numeric and object keys."""

    def __init__(self, text: str) -> None:
        self.text = text

    def _skip(self, pos: int) -> int:
        return _WS.match(self.text, pos).end()

    def _fail(self, pos: int, what: str) -> ProtocolError:
        snippet = self.text[pos:pos + 20]
        return ProtocolError(f"invalid JSON body at offset {pos}: expected {what}, found {snippet!r}")

    def parse(self, pos: int) -> tuple[Any, int]:
        text = self.text
        pos = self._skip(pos)
        if pos >= len(text):
            raise self._fail(pos, "a value")
        ch = text[pos]
        if ch == "{":
            return self._object(pos + 1)
        if ch == "[":
            return self._array(pos + 1)
        if ch == '"':
            try:
                return _scanstring(text, pos + 1, True)
            except ValueError as exc:
                raise ProtocolError(f"invalid JSON string at offset {pos}: {exc}") from exc
        for literal, value in (("true", True), ("false", False), ("null", None)):
            if text.startswith(literal, pos):
                return value, pos + len(literal)
        m = _NUMBER.match(text, pos)
        if m:
            s = m.group()
            return (float(s) if any(c in s for c in ".eE") else int(s)), m.end()
        raise self._fail(pos, "a value")

    def _key(self, pos: int) -> tuple[str, int]:
        text = self.text
        pos = self._skip(pos)
        if pos < len(text) and text[pos] == '"':
            try:
                return _scanstring(text, pos + 1, True)
            except ValueError as exc:
                raise ProtocolError(f"invalid JSON key at offset {pos}: {exc}") from exc
        if pos < len(text) and text[pos] == "{":
            obj, end = self._object(pos + 1)
            return json.dumps(obj, sort_keys=True, separators=(",", ":")), end
        m = _NUMBER.match(text, pos)
        if m:
            return m.group(), m.end()
        raise self._fail(pos, "an object key")

    def _object(self, pos: int) -> tuple[dict[str, Any], int]:
        out: dict[str, Any] = {}
        pos = self._skip(pos)
        if pos < len(self.text) and self.text[pos] == "}":
            return out, pos + 1
        while True:
            key, pos = self._key(pos)
            pos = self._skip(pos)
            if pos >= len(self.text) or self.text[pos] != ":":
                raise self._fail(pos, "':'")
            value, pos = self.parse(pos + 1)
            out[key] = value
            pos = self._skip(pos)
            if pos < len(self.text) and self.text[pos] == ",":
                pos += 1
                continue
            if pos < len(self.text) and self.text[pos] == "}":
                return out, pos + 1
            raise self._fail(pos, "',' or '}'")

    def _array(self, pos: int) -> tuple[list[Any], int]:
        out: list[Any] = []
        pos = self._skip(pos)
        if pos < len(self.text) and self.text[pos] == "]":
            return out, pos + 1
        while True:
            value, pos = self.parse(pos)
            out.append(value)
            pos = self._skip(pos)
            if pos < len(self.text) and self.text[pos] == ",":
                pos += 1
                continue
            if pos < len(self.text) and self.text[pos] == "]":
                return out, pos + 1
            raise self._fail(pos, "',' or ']'")
