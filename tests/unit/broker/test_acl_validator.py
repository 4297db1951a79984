"""The ACL decision for each kind of request, in the order a 4.9.8 broker takes them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rmqrun.broker.acl.config import load_acl_file
from rmqrun.broker.acl.validator import AclRefused, AclValidator
from rmqrun.remoting.codes import RequestCode as R
from rmqrun.remoting.frame import RemotingCommand
from tests.acl_kit import ACCOUNTS_YAML, ADMIN_AK, ADMIN_SK, USER_AK, USER_SK, sign, write_acl

IP = "127.0.0.1"


@pytest.fixture
def acl(tmp_path: Path) -> AclValidator:
    return AclValidator(load_acl_file(write_acl(tmp_path / "acl.yml")))


def user(code: int, body: bytes | None = None, **fields: str) -> RemotingCommand:
    return sign(RemotingCommand(code, dict(fields), body), USER_AK, USER_SK)


def signed_by(access_key: str, secret_key: str, code: int, **fields: str) -> RemotingCommand:
    return sign(RemotingCommand(code, dict(fields)), access_key, secret_key)


def refusal(acl: AclValidator, cmd: RemotingCommand, ip: str = IP) -> str | None:
    try:
        acl.check(cmd, ip)
    except AclRefused as exc:
        return str(exc)
    return None


def heartbeat(group: str, *topics: str) -> bytes:
    return json.dumps({"clientID": "c1", "producerDataSet": [], "consumerDataSet": [{
        "groupName": group, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
        "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "unitMode": False,
        "subscriptionDataSet": [{"topic": t, "subString": "*", "classFilterMode": False, "tagsSet": [],
                                 "codeSet": [], "subVersion": 1, "expressionType": "TAG"} for t in topics]}]}).encode()


@pytest.mark.parametrize("cmd, expected", [
    (user(R.SEND_MESSAGE_V2, a="PG", b="OpenTopic"), None),
    (user(R.SEND_MESSAGE, producerGroup="PG", topic="OpenTopic"), None),
    (user(R.SEND_MESSAGE_V2, a="PG", b="ClosedTopic"), "No default permission for topic:ClosedTopic"),
    (user(R.SEND_MESSAGE_V2, a="PG", b="ReadOnlyTopic"), "No default permission for topic:ReadOnlyTopic"),
    (user(R.SEND_MESSAGE_V2, a="PG", b="Unlisted"), "No default permission for topic:Unlisted"),
    # a send to a retry topic is a consumer's send-back: its group needs SUB, the topic is not looked at
    (user(R.SEND_MESSAGE_V2, a="OpenGroup", b="%RETRY%OpenGroup"), None),
    (user(R.SEND_MESSAGE_V2, a="ClosedGroup", b="%RETRY%ClosedGroup"), "No default permission for group:ClosedGroup"),
    # SEND_MESSAGE (full names) to a retry topic: 4.9.8 reads the field "group", which a send's header does not
    # have (it has producerGroup), so only the signature counts; a request that does carry "group" is checked
    (user(R.SEND_MESSAGE, producerGroup="ClosedGroup", topic="%RETRY%ClosedGroup"), None),
    (user(R.SEND_MESSAGE, producerGroup="OpenGroup", group="ClosedGroup", topic="%RETRY%OpenGroup"),
     "No default permission for group:ClosedGroup"),
    (user(R.SEND_MESSAGE, producerGroup="PG", topic="ClosedTopic"), "No default permission for topic:ClosedTopic"),
    (user(R.CONSUMER_SEND_MSG_BACK, group="ClosedGroup", offset="0"), "No default permission for group:ClosedGroup"),
    (user(R.CONSUMER_SEND_MSG_BACK, group="AnyGroup", offset="0"), None),  # defaultGroupPerm SUB
    (user(R.PULL_MESSAGE, topic="ReadOnlyTopic", consumerGroup="OpenGroup"), None),
    (user(R.PULL_MESSAGE, topic="ReadOnlyTopic", consumerGroup="ClosedGroup"),
     "No default permission for group:ClosedGroup"),
    (user(R.PULL_MESSAGE, topic="ClosedTopic", consumerGroup="OpenGroup"),
     "No default permission for topic:ClosedTopic"),
    (user(R.QUERY_MESSAGE, topic="Unlisted", key="k"), "No default permission for topic:Unlisted"),
    # POP codes (5.x): topic and group SUB; an ack of a revived message names the pop retry topic
    (user(R.POP_MESSAGE, topic="ReadOnlyTopic", consumerGroup="OpenGroup"), None),
    (user(R.POP_MESSAGE, topic="ClosedTopic", consumerGroup="OpenGroup"),
     "No default permission for topic:ClosedTopic"),
    (user(R.POP_MESSAGE, topic="ReadOnlyTopic", consumerGroup="ClosedGroup"),
     "No default permission for group:ClosedGroup"),
    (user(R.ACK_MESSAGE, topic="%RETRY%OpenGroup_ReadOnlyTopic", consumerGroup="OpenGroup"), None),
    (user(R.ACK_MESSAGE, topic="%RETRY%OpenGroup_ClosedTopic", consumerGroup="OpenGroup"),
     "No default permission for topic:ClosedTopic"),
    (user(R.CHANGE_MESSAGE_INVISIBLETIME, topic="ReadOnlyTopic", consumerGroup="ClosedGroup"),
     "No default permission for group:ClosedGroup"),
    (user(R.NOTIFICATION, topic="ClosedTopic", consumerGroup="OpenGroup"),
     "No default permission for topic:ClosedTopic"),
    (user(R.BATCH_ACK_MESSAGE, b'{"acks":[{"c":"OpenGroup","t":"ClosedTopic","r":"1","so":0,"q":0,"pt":1,"b":""}]}'),
     "No default permission for topic:ClosedTopic"),
    (user(R.BATCH_ACK_MESSAGE, b'{"acks":[{"c":"OpenGroup","t":"ReadOnlyTopic","r":"0","so":0,"q":0,"pt":1,"b":""}]}'),
     None),
    (user(R.HEART_BEAT, heartbeat("OpenGroup", "OpenTopic", "%RETRY%OpenGroup")), None),
    (user(R.HEART_BEAT, heartbeat("OpenGroup", "ClosedTopic")), "No default permission for topic:ClosedTopic"),
    (user(R.HEART_BEAT, heartbeat("ClosedGroup", "OpenTopic")), "No default permission for group:ClosedGroup"),
    (user(R.HEART_BEAT, b"{not json"), "heartbeat body unreadable"),
    (user(R.UNREGISTER_CLIENT, clientID="c1", consumerGroup="ClosedGroup"),
     "No default permission for group:ClosedGroup"),
    (user(R.UNREGISTER_CLIENT, clientID="c1", producerGroup="AnyProducer"), None),
    (user(R.UNREGISTER_CLIENT, producerGroup="AnyProducer"), "the custom field <clientID> is null"),
    (user(R.GET_CONSUMER_LIST_BY_GROUP, consumerGroup="ClosedGroup"), "No default permission for group:ClosedGroup"),
    (user(R.UPDATE_CONSUMER_OFFSET, consumerGroup="OpenGroup", topic="ClosedTopic", queueId="0", commitOffset="1"),
     "No default permission for topic:ClosedTopic"),
    (user(R.UPDATE_CONSUMER_OFFSET, consumerGroup="OpenGroup", topic="OpenTopic", commitOffset="1"),
     "the custom field <queueId> is null"),
    # codes without resources need only a good signature; admin codes need an admin account
    (user(R.GET_BROKER_RUNTIME_INFO), None),
    (user(R.UPDATE_AND_CREATE_TOPIC, topic="X"),
     "Need admin permission for request code=17, but accessKey=RocketMQUser is not"),
    (user(R.DELETE_SUBSCRIPTIONGROUP, groupName="G"),
     "Need admin permission for request code=207, but accessKey=RocketMQUser is not"),
    (sign(RemotingCommand(R.UPDATE_AND_CREATE_TOPIC, {"topic": "X"}), ADMIN_AK, ADMIN_SK), None),
    (sign(RemotingCommand(R.PULL_MESSAGE, {"topic": "Any", "consumerGroup": "Any"}), ADMIN_AK, ADMIN_SK), None),
    # message traces may always be published (4.9.8 skips the check for PUB on RMQ_SYS_TRACE_TOPIC)
    (user(R.SEND_MESSAGE_V2, a="PG", b="RMQ_SYS_TRACE_TOPIC"), None),
])
def test_rules(acl: AclValidator, cmd: RemotingCommand, expected: str | None) -> None:
    got = refusal(acl, cmd)
    if expected is None:
        assert got is None
    else:
        assert got is not None and got.startswith(expected), got


def test_who_is_asking(acl: AclValidator) -> None:
    assert refusal(acl, RemotingCommand(R.GET_BROKER_RUNTIME_INFO)) == "No accessKey is configured"
    cpp_unsigned = RemotingCommand(R.GET_BROKER_RUNTIME_INFO, {"AccessKey": "", "Signature": "x"})
    assert refusal(acl, cpp_unsigned) == "No acl config for "
    stranger = sign(RemotingCommand(R.GET_BROKER_RUNTIME_INFO), "Stranger1", "whatever")
    assert refusal(acl, stranger) == "No acl config for Stranger1"
    wrong = sign(RemotingCommand(R.GET_BROKER_RUNTIME_INFO), USER_AK, "not-the-secret")
    assert refusal(acl, wrong) == f"Check signature failed for accessKey={USER_AK}"
    tampered = user(R.SEND_MESSAGE_V2, b"body", a="PG", b="OpenTopic")
    tampered.body = b"bodY"
    assert refusal(acl, tampered) == f"Check signature failed for accessKey={USER_AK}"


def test_white_addresses(tmp_path: Path) -> None:
    acl = AclValidator(load_acl_file(write_acl(tmp_path / "acl.yml", """\
        globalWhiteRemoteAddresses: [10.1.1.*]
        accounts:
          - accessKey: Whitelisted
            secretKey: secret-12
            whiteRemoteAddress: 10.2.2.2
            defaultTopicPerm: DENY
        """)))
    unsigned = RemotingCommand(R.SEND_MESSAGE_V2, {"a": "PG", "b": "T"})
    assert refusal(acl, unsigned, "10.1.1.9") is None          # global white: anything goes
    assert refusal(acl, unsigned, "10.2.2.2") == "No accessKey is configured"
    badly_signed = sign(RemotingCommand(R.SEND_MESSAGE_V2, {"a": "PG", "b": "T"}), "Whitelisted", "wrong-secret")
    # the account's own white address skips the signature *and* the permissions (4.9.8)
    assert refusal(acl, badly_signed, "10.2.2.2") is None
    assert refusal(acl, badly_signed, "10.2.2.3") == "Check signature failed for accessKey=Whitelisted"


def test_admin_with_listed_perms_falls_back_to_defaults(tmp_path: Path) -> None:
    # 4.9.8: an admin account is unrestricted only while it lists no topic/group permission
    acl = AclValidator(load_acl_file(write_acl(tmp_path / "acl.yml", """\
        accounts:
          - accessKey: AdminWithPerms
            secretKey: secret-12
            admin: true
            topicPerms: [Mine=PUB]
        """)))
    assert refusal(acl, signed_by("AdminWithPerms", "secret-12", R.SEND_MESSAGE_V2, a="PG", b="Mine")) is None
    assert refusal(acl, signed_by("AdminWithPerms", "secret-12", R.SEND_MESSAGE_V2, a="PG", b="Other")) == \
        "No default permission for topic:Other"


def test_non_admin_without_listed_perms_gets_only_its_defaults(tmp_path: Path) -> None:
    # 4.9.8: only an *admin* account without listed permissions is unrestricted; a non-admin
    # one with none listed has its defaults for every topic and group (missing ones: DENY)
    acl = AclValidator(load_acl_file(write_acl(tmp_path / "acl.yml", """\
        accounts:
          - accessKey: PlainUser
            secretKey: secret-34
            admin: false
            defaultTopicPerm: SUB
          - accessKey: BareUser
            secretKey: secret-56
        """)))
    plain, bare = ("PlainUser", "secret-34"), ("BareUser", "secret-56")
    assert refusal(acl, signed_by(*plain, R.SEND_MESSAGE_V2, a="PG", b="Any")) == "No default permission for topic:Any"
    assert refusal(acl, signed_by(*plain, R.PULL_MESSAGE, consumerGroup="G", topic="Any", queueId="0",
                                  queueOffset="0")) == "No default permission for group:G"
    assert refusal(acl, signed_by(*bare, R.SEND_MESSAGE_V2, a="PG", b="Any")) == "No default permission for topic:Any"
    assert refusal(acl, signed_by(*bare, R.UPDATE_AND_CREATE_TOPIC, topic="New")) == \
        f"Need admin permission for request code={R.UPDATE_AND_CREATE_TOPIC}, but accessKey=BareUser is not"


def test_permission_bits() -> None:
    from rmqrun.broker.acl.config import ANY, DENY, PUB, SUB
    from rmqrun.broker.acl.validator import perm_allows
    assert perm_allows(PUB, PUB) and perm_allows(SUB, PUB | SUB) and not perm_allows(PUB, SUB)
    assert not perm_allows(PUB, PUB | DENY)          # DENY wins over anything it is combined with
    assert perm_allows(ANY, SUB) and perm_allows(ANY, PUB) and not perm_allows(ANY, DENY)
