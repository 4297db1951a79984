"""Admin requests the broker forwards to a group's clients, when the request or the clients fall short.

Raw frames over TCP. A missing field is named as Java's header check names it,
a number that is not one is refused, a group with nobody online is said to be so,
and a client that answers with an error is passed through (running info) or left
out of the gathered answer (consumer status), never taken for an empty success.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from rmqrun.broker.app import EmbeddedBroker
from rmqrun.protocol.bodies import GetConsumerStatusBody
from rmqrun.remoting.codes import RequestCode, ResponseCode
from tests.integration.broker_kit import Client


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(asyncio.wait_for(coro, 60))


def test_forwarded_admin_requests_refused_by_name(tmp_path: Path) -> None:
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d") as eb:
            admin = await Client.connect(eb.namesrv_address, eb.broker_address)
            member = await Client.connect(eb.namesrv_address, eb.broker_address)  # answers NOT_SUPPORTED to all
            try:
                assert (await admin.send("FT", b"m", queue_id=0)).code == ResponseCode.SUCCESS
                reset, status = RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS
                cases = [
                    (reset, {"group": "G", "timestamp": "1"}, "the custom field <topic> is null"),
                    (reset, {"topic": "FT", "timestamp": "1"}, "the custom field <group> is null"),
                    (reset, {"topic": "FT", "group": "G"}, "the custom field <timestamp> is null"),
                    (reset, {"topic": "FT", "group": "G", "timestamp": "yesterday"}, "bad reset request"),
                    (status, {"group": "G"}, "the custom field <topic> is null"),
                    (status, {"topic": "FT"}, "the custom field <group> is null"),
                    (status, {"topic": "FT", "group": "Nobody"},
                     "No Any Consumer online in the consumer group: [Nobody]"),
                    (RequestCode.GET_CONSUMER_RUNNING_INFO, {"clientId": "c@1"}, "the custom field <consumerGroup> is null"),
                    (RequestCode.GET_CONSUMER_RUNNING_INFO, {"consumerGroup": "G"}, "the custom field <clientId> is null"),
                    (RequestCode.GET_CONSUMER_RUNNING_INFO, {"consumerGroup": "G", "clientId": "ghost@1"},
                     "The Consumer <G> <ghost@1> not online"),
                    (RequestCode.CONSUME_MESSAGE_DIRECTLY, {"consumerGroup": "G", "clientId": "c@1", "msgId": "XYZ"},
                     "bad msgId XYZ"),
                ]
                for code, ext, remark in cases:
                    resp = await admin.call(code, ext)
                    assert resp.code == ResponseCode.SYSTEM_ERROR, (code, ext, resp.code, resp.remark)
                    assert resp.remark is not None and resp.remark.startswith(remark), (ext, resp.remark)

                # a member that answers every broker request with REQUEST_CODE_NOT_SUPPORTED
                await member.heartbeat("member@1", "G", {"FT": "*"})
                info = await admin.call(RequestCode.GET_CONSUMER_RUNNING_INFO,
                                        {"consumerGroup": "G", "clientId": "member@1", "jstackEnable": "false"})
                assert info.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED, "the client's own answer, passed through"
                gathered = await admin.call(status, {"topic": "FT", "group": "G"})
                assert gathered.code == ResponseCode.SUCCESS
                assert GetConsumerStatusBody.from_json(gathered.body or b"{}").consumer_table == {}, (
                    "a member's refusal is left out, not reported as an empty table")
            finally:
                await member.close()
                await admin.close()
    run(main())
