"""What every processor needs: header parsing with Java's errors, and Java-shaped answers.

A Java broker answers a request whose custom header does not parse (a
required field missing, a number that is not one) with SYSTEM_ERROR and the
exception text as remark, and keeps the connection; :func:`parse_header`
raises :class:`BadRequest` carrying exactly that answer.

Answers carry their ext fields in the order the real broker writes them, so
captured frames can be compared byte for byte: with JSON headers that is the
iteration order of the Java ``HashMap`` holding them; with binary (ROCKETMQ)
headers the custom header's fields come first in declaration order, then the
extra fields the broker added by hand. A response built from a typed header
whose fields are all null still says ``"extFields":{}`` in JSON.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Callable, Mapping, TypeVar

from rmqrun.broker.javamap import JavaPropertyMap
from rmqrun.errors import RmqrunError
from rmqrun.protocol.header_codec import Header
from rmqrun.remoting.codes import ResponseCode
from rmqrun.remoting.errors import MissingFieldError, ProtocolError
from rmqrun.remoting.frame import RemotingCommand, SerializeType

H = TypeVar("H", bound=Header)


class BadRequest(RmqrunError):
    """A request the processor refuses; ``response`` is the answer to send."""

    def __init__(self, response: RemotingCommand) -> None:
        super().__init__(response.remark)
        self.response = response


def parse_header(cmd: RemotingCommand, cls: type[H],
                 fast: Callable[[dict[str, str]], H | None] | None = None) -> H:
    """``cls`` read from the request's ext fields; a malformed one raises :class:`BadRequest` with Java's answer.

    ``fast``: a hot path's own reader of the usual header (a pull's, a pop's), tried first; where it gives None
    the generic parser reads the fields and says what is wrong with them."""
    if fast is not None:
        header = fast(cmd.ext_fields)
        if header is not None:
            return header
    try:
        return cls.from_ext(cmd.ext_fields)
    except MissingFieldError as exc:  # Java's wording for a null @CFNotNull field
        raise BadRequest(cmd.response(ResponseCode.SYSTEM_ERROR, f"the custom field <{exc.field}> is null")) from None
    except ProtocolError as exc:
        raise BadRequest(cmd.response(ResponseCode.SYSTEM_ERROR, str(exc))) from None


def java_bool(value: Any) -> bool:
    """``Boolean.parseBoolean``: only "true" in any case is true ("1" is not)."""
    return isinstance(value, str) and value.lower() == "true" or value is True


@lru_cache(maxsize=256)
def _hash_order(keys: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(JavaPropertyMap((k, "") for k in keys).keys())


def answer(cmd: RemotingCommand, code: int = ResponseCode.SUCCESS, remark: str | None = None, *,
           header: Mapping[str, Any] | None = None, extra: Mapping[str, Any] | None = None,
           body: bytes | None = None, typed: bool = True) -> RemotingCommand:
    """A response to ``cmd`` with ext fields in the real broker's order.

    ``header``: the custom header's fields, in the Java class's declaration
    order (None values are skipped, like Java). ``extra``: fields added with
    ``addExtField``. ``typed``: the Java response was created from a header
    class (so JSON shows ``extFields`` even when empty).
    """
    fields = {k: _text(v) for k, v in (header or {}).items() if v is not None}
    added = {k: _text(v) for k, v in (extra or {}).items() if v is not None}
    if cmd.serialize_type == SerializeType.ROCKETMQ:
        ext = dict(fields)
        for k in _hash_order(tuple(added)):
            ext[k] = added[k]
    else:
        merged = {**fields, **added}
        ext = {k: merged[k] for k in _hash_order(tuple(merged))}
    resp = cmd.response(code, remark, ext, body)
    resp.empty_ext_present = typed and not ext and cmd.serialize_type == SerializeType.JSON
    return resp


def answer_text(cmd: RemotingCommand, code: int, remark: str | None, fields: dict[str, str],
                body: bytes | None = None) -> RemotingCommand:
    """:func:`answer` for a typed header already in text, every field set, nothing added: the same command
    without a pass converting the fields (a pop's answer, built on every pop, comes so)."""
    if cmd.serialize_type == SerializeType.JSON:
        fields = {k: fields[k] for k in _hash_order(tuple(fields))}
    resp = cmd.response(code, remark, fields, body)
    resp.empty_ext_present = not fields and cmd.serialize_type == SerializeType.JSON
    return resp


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


#: ``FAQUrl.suggestTodo``: every 4.9.8 FAQ link points at the same page.
FAQ_SUFFIX = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."
