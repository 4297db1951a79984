"""Every request code has one spec, and nothing is served without one (rmqrun/protocol/requests.py).

The broker, its name server and the client each serve exactly the codes whose spec names them; registering a
code without a spec (or with a spec naming another side) fails; a spec whose ACL need names a field its header
does not have fails at once; the ACL's admin codes come from the specs; docs/admin-protocol.md's code table is
the specs' own.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import rmqrun
from rmqrun.broker.acl.resources import ADMIN_CODES
from rmqrun.broker.broker import Broker
from rmqrun.broker.config import BrokerConfig
from rmqrun.broker.namesrv import NameServer
from rmqrun.client.instance import ClientInstance
from rmqrun.protocol import requests
from rmqrun.protocol.headers import PullMessageRequestHeader
from rmqrun.protocol.requests import (
    SPECS, Group, RequestSpec, RequestSpecError, Server, Topic, register_served, served_spec,
)
from rmqrun.remoting.codes import RequestCode

ROOT = Path(__file__).resolve().parents[3]


def _served(server: Server) -> set[int]:
    return {code for code, spec in SPECS.items() if server in spec.served_by}


def test_every_request_code_has_exactly_one_spec() -> None:
    assert set(SPECS) == {int(c) for c in RequestCode}
    assert all(int(spec.code) == code for code, spec in SPECS.items())


def test_the_broker_serves_exactly_the_codes_its_specs_name(tmp_path: Path) -> None:
    broker = Broker(BrokerConfig(data_dir=tmp_path, port=0))
    assert set(broker.server.processors) == _served(Server.BROKER)


def test_the_name_server_serves_exactly_the_codes_its_specs_name() -> None:
    assert set(NameServer(port=0).server.processors) == _served(Server.NAMESRV)


def test_the_client_answers_exactly_the_codes_its_specs_name() -> None:
    assert {int(c) for c in ClientInstance._SERVED} == _served(Server.CLIENT)
    for code in ClientInstance._SERVED:
        assert served_spec(code, Server.CLIENT).header is not None  # the client decodes it with the spec's header


def test_every_request_the_client_sends_a_broker_is_a_served_client_request() -> None:
    tree = ast.parse((Path(rmqrun.__file__).parent / "client" / "broker.py").read_text())
    sent = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name) and node.value.id == "RequestCode"}
    assert len(sent) > 15  # the scan found the calls
    for name in sent:
        spec = SPECS[int(RequestCode[name])]
        assert Server.BROKER in spec.served_by, name


def test_a_served_code_without_a_spec_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    registered: dict[int, object] = {}
    monkeypatch.delitem(SPECS, int(RequestCode.PULL_MESSAGE))
    with pytest.raises(RequestSpecError, match="no RequestSpec"):
        register_served(registered.__setitem__, Server.BROKER, {RequestCode.PULL_MESSAGE: object()})
    assert registered == {}


def test_a_code_served_by_the_wrong_side_is_refused() -> None:
    registered: dict[int, object] = {}
    with pytest.raises(RequestSpecError, match="GET_ROUTEINFO_BY_TOPIC is served by the broker"):
        register_served(registered.__setitem__, Server.BROKER, {RequestCode.GET_ROUTEINFO_BY_TOPIC: object()})
    assert registered == {}


def test_the_broker_does_not_start_serving_a_code_without_a_spec(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(SPECS, int(RequestCode.QUERY_ASSIGNMENT))
    with pytest.raises(RequestSpecError, match="400"):
        Broker(BrokerConfig(data_dir=tmp_path, port=0))


def test_an_acl_need_naming_a_field_the_header_lacks_fails_at_once() -> None:
    with pytest.raises(RequestSpecError, match="consumerGroup"):
        RequestSpec(RequestCode.PULL_MESSAGE, requests.Caller.CLIENT, frozenset({Server.BROKER}),
                    PullMessageRequestHeader, None, (Topic("topic"), Group("consumerGroup")))
    with pytest.raises(RequestSpecError, match="strict"):
        RequestSpec(RequestCode.HEART_BEAT, requests.Caller.CLIENT, frozenset({Server.BROKER}), strict=True)


def test_the_admin_codes_are_the_specs_admin_codes() -> None:
    assert ADMIN_CODES == {code for code, spec in SPECS.items() if spec.admin}
    assert all(spec.caller is requests.Caller.ADMIN for spec in SPECS.values() if spec.admin)


def test_the_admin_protocol_doc_has_the_specs_table() -> None:
    text = (ROOT / "docs" / "admin-protocol.md").read_text()
    start, end = text.index(requests.TABLE_BEGIN), text.index(requests.TABLE_END) + len(requests.TABLE_END) + 1
    assert text[start:end] == requests.markdown_table(), \
        "docs/admin-protocol.md's code table is stale: run python scripts/gen_request_reference.py"
    for spec in SPECS.values():
        assert f"| {int(spec.code)} | {spec.code.name} |" in text
