"""Reading plain_acl.yml: the 4.9.8 layout is understood, mistakes are refused by name, secrets stay out."""

from __future__ import annotations

from pathlib import Path

import pytest

from rmqrun.broker.acl.addresses import AddressPatternError, compile_rule
from rmqrun.broker.acl.config import DENY, PUB, SUB, AclConfigError, load_acl_file
from tests.acl_kit import ACCOUNTS_YAML, write_acl

# The sample that ships with RocketMQ 4.9.8 (distribution/conf/plain_acl.yml), as users have it.
STOCK = """\
globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.*

accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      # the group should convert to retry topic
      - groupA=DENY
      - groupB=PUB|SUB
      - groupC=SUB

  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
    # if it is admin, it could access all resources
    admin: true
"""


def test_stock_file(tmp_path: Path) -> None:
    cfg = load_acl_file(write_acl(tmp_path / "plain_acl.yml", STOCK))
    user, admin = cfg.accounts["RocketMQ"], cfg.accounts["rocketmq2"]
    assert user.secret_key == "12345678"  # a YAML number is still the secret's text
    assert not user.admin and admin.admin
    assert (user.default_topic_perm, user.default_group_perm) == (DENY, SUB)
    assert user.perms == {"topicA": DENY, "topicB": PUB | SUB, "topicC": SUB,
                          "%RETRY%groupA": DENY, "%RETRY%groupB": PUB | SUB, "%RETRY%groupC": SUB}
    assert admin.perms is None and admin.default_topic_perm == DENY  # missing default: DENY
    assert not user.white_address.matches("127.0.0.1")
    assert admin.white_address.matches("192.168.1.77") and not admin.white_address.matches("192.168.2.1")
    assert [r.matches("10.10.103.5") for r in cfg.global_white] == [True, False]
    assert "12345678" not in repr(user)


@pytest.mark.parametrize("text, fragment", [
    ("accounts:\n  - accessKey: short\n    secretKey: longenough\n", "accessKey must be longer than 6"),
    ("accounts:\n  - accessKey: longenough\n    secretKey: s3cr3\n", "secretKey must be longer than 6"),
    ("accounts:\n  - accessKey: longenough\n    secretKey: TOPSECRET1\n    defaultTopicPerm: PUBSUB\n",
     "permission 'PUBSUB'"),
    ("accounts:\n  - accessKey: longenough\n    secretKey: TOPSECRET1\n    topicPerms: [T=READ]\n", "'READ'"),
    ("accounts:\n  - accessKey: longenough\n    secretKey: TOPSECRET1\n    topicPerms: [T]\n", "not name=PERM"),
    ("accounts:\n  - accessKey: longenough\n    secretKey: TOPSECRET1\n    secretkey: x\n",
     "unknown key(s) ['secretkey']"),
    ("accounts:\n  - accessKey: longenough\n    secretKey: TOPSECRET1\n    whiteRemoteAddress: 10.0.0\n",
     "'10.0.0' is not an IP address"),
    ("accounts:\n  - accessKey: longenough\n    secretKey: TOPSECRET1\n    admin: yes please\n", "admin must be"),
    ("accounts:\n  - accessKey: longenough\n    secretKey: TOPSECRET1\n"
     "  - accessKey: longenough\n    secretKey: TOPSECRET2\n", "listed twice"),
    ("acounts: []\n", "unknown key(s) ['acounts']"),
    ("", "no accounts"),
    ("accounts: [a, b\n", "not valid YAML"),
    ("- just a list\n", "must be a mapping"),
    ("globalWhiteRemoteAddresses: 10.0.0.1\n", "globalWhiteRemoteAddresses must be a list"),
    ("globalWhiteRemoteAddresses: [1.2.3]\n", "'1.2.3' is not an IP address"),
    ("accounts: {accessKey: longenough}\n", "accounts must be a list"),
    ("accounts: [longenough]\n", "accounts[0] must be a mapping"),
    ("accounts:\n  - accessKey: longenough\n    secretKey: TOPSECRET1\n    groupPerms: G=SUB\n",
     "groupPerms must be a list"),
])
def test_bad_files_are_refused_by_name(tmp_path: Path, text: str, fragment: str) -> None:
    path = write_acl(tmp_path / "acl.yml", text)
    with pytest.raises(AclConfigError) as err:
        load_acl_file(path)
    message = str(err.value)
    assert message.startswith(f"--acl {path}: ") and fragment in message
    assert "TOPSECRET" not in message


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(AclConfigError, match=r"--acl .*nope.yml: cannot read it"):
        load_acl_file(tmp_path / "nope.yml")


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "acl.yml"
    path.write_bytes(b"accounts: [\xff]\n")
    with pytest.raises(AclConfigError, match="not UTF-8 text"):
        load_acl_file(path)


def test_admin_flag_forms(tmp_path: Path) -> None:
    text = ("accounts:\n  - {accessKey: quoted-true, secretKey: TOPSECRET1, admin: 'True'}\n"
            "  - {accessKey: empty-flag, secretKey: TOPSECRET1, admin: }\n")
    cfg = load_acl_file(write_acl(tmp_path / "acl.yml", text))
    assert cfg.accounts["quoted-true"].admin and not cfg.accounts["empty-flag"].admin


def test_kit_file_loads(tmp_path: Path) -> None:
    cfg = load_acl_file(write_acl(tmp_path / "acl.yml", ACCOUNTS_YAML))
    assert set(cfg.accounts) == {"rocketmq2", "RocketMQUser"}


@pytest.mark.parametrize("pattern, inside, outside", [
    ("*", ["1.2.3.4", "::1"], []),
    ("192.168.0.1", ["192.168.0.1"], ["192.168.0.2"]),
    ("192.168.0.1,10.0.0.1", ["10.0.0.1", "192.168.0.1"], ["10.0.0.2"]),
    ("192.168.0.{1,2}", ["192.168.0.2"], ["192.168.0.3"]),
    ("192.168.1-10.*", ["192.168.1.9", "192.168.10.255"], ["192.168.11.1", "192.167.5.5"]),
    ("192.168.0.1-100", ["192.168.0.100"], ["192.168.0.101"]),
    ("::1", ["::1", "0:0:0:0:0:0:0:1"], ["127.0.0.1"]),
    ("", [], ["127.0.0.1"]),
    ("10.0.0.*", ["10.0.0.0"], ["::1", "not-an-ip", "10.0.1.0"]),
])
def test_white_address_forms(pattern: str, inside: list[str], outside: list[str]) -> None:
    rule = compile_rule(pattern)
    assert all(rule.matches(ip) for ip in inside)
    assert not any(rule.matches(ip) for ip in outside)


@pytest.mark.parametrize("pattern", ["300.1.1.*", "1.2.*", "1.2.9-3.*", "fe80::1-5", "*.1.1.1", "1.2.3.x", "{1,2}",
                                     "1.2.3.{ }", "1.2.3.4-", "1.2.3*.4"])
def test_bad_white_addresses(pattern: str) -> None:
    with pytest.raises(AddressPatternError, match="white address"):
        compile_rule(pattern)
