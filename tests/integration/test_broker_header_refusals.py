"""A request whose typed header does not parse is refused in Java's words, over TCP.

A required field that is absent is named as Java's ``decodeCommandCustomHeader`` names it
("the custom field <queueId> is null"); the broker reads the field from the
:class:`~rmqrun.remoting.errors.MissingFieldError` it gets, never from the error's text. A value
that is present but not a number is refused with the parse error's own text. Either way the
connection stays open for the next request.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rmqrun.broker.app import EmbeddedBroker
from rmqrun.protocol.headers import GetMaxOffsetRequestHeader
from rmqrun.remoting.codes import RequestCode, ResponseCode
from rmqrun.remoting.errors import MissingFieldError, ProtocolError
from tests.integration.broker_kit import Client


def test_missing_and_unparsable_header_fields_are_refused_by_name(tmp_path: Path) -> None:
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d") as eb:
            c = await Client.connect(eb.namesrv_address, eb.broker_address)
            try:
                assert (await c.send("HR", b"m", queue_id=0)).code == ResponseCode.SUCCESS
                missing = await c.call(RequestCode.GET_MAX_OFFSET, {"topic": "HR"})
                assert (missing.code, missing.remark) == (ResponseCode.SYSTEM_ERROR,
                                                          "the custom field <queueId> is null")
                first = await c.call(RequestCode.GET_MAX_OFFSET, {})  # the first required field is named
                assert first.remark == "the custom field <topic> is null"
                bad = await c.call(RequestCode.GET_MAX_OFFSET, {"topic": "HR", "queueId": "zero"})
                assert bad.code == ResponseCode.SYSTEM_ERROR
                assert "queueId" in (bad.remark or "") and "custom field" not in (bad.remark or "")
                ok = await c.call(RequestCode.GET_MAX_OFFSET, {"topic": "HR", "queueId": "0"})
                assert (ok.code, ok.ext_fields.get("offset")) == (ResponseCode.SUCCESS, "1")
            finally:
                await c.close()

    asyncio.run(asyncio.wait_for(main(), 60))


def test_a_missing_field_is_carried_on_the_error_and_its_text_is_unchanged() -> None:
    with pytest.raises(MissingFieldError) as info:
        GetMaxOffsetRequestHeader.from_ext({"topic": "T"})
    assert (info.value.header, info.value.field) == ("GetMaxOffsetRequestHeader", "queueId")
    assert isinstance(info.value, ProtocolError)
    assert str(info.value) == "GetMaxOffsetRequestHeader: required field 'queueId' is missing"
