"""Reading a ``plain_acl.yml`` (RocketMQ 4.x layout) into accounts and permissions.

The layout users already have::

    globalWhiteRemoteAddresses: [10.10.103.*]
    accounts:
      - accessKey: RocketMQ
        secretKey: 12345678
        whiteRemoteAddress:
        admin: false
        defaultTopicPerm: DENY
        defaultGroupPerm: SUB
        topicPerms: [topicA=DENY, topicB=PUB|SUB]
        groupPerms: [groupA=DENY, groupB=SUB]

Meanings are 4.9.8's: a missing default permission is DENY; a group's
permission is kept under its retry topic (``%RETRY%group``), which is what
requests are checked against; access and secret keys need at least 7
characters. Where 4.9.8 silently turns a misspelt permission into DENY or
skips an unknown key, this loader refuses the file and names the account and
the value, because a typo in an ACL file should not quietly lock users out.
Secrets are never part of an error message.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from rmqrun.broker.acl.addresses import AddressPatternError, AddressRule, compile_rule
from rmqrun.errors import RmqrunError
from rmqrun.topic_names import retry_topic

DENY = 1
ANY = 2
PUB = 4
SUB = 8

_PERM_WORDS = {"DENY": DENY, "PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB}
_ACCOUNT_KEYS = ("accessKey", "secretKey", "whiteRemoteAddress", "admin", "defaultTopicPerm", "defaultGroupPerm",
                 "topicPerms", "groupPerms")
_TOP_KEYS = ("globalWhiteRemoteAddresses", "accounts", "dataVersion")
#: 4.9.8 refuses keys of this length or shorter (AclConstants.ACCESS_KEY_MIN_LENGTH / SECRET_KEY_MIN_LENGTH).
_KEY_MIN_LENGTH = 6


class AclConfigError(RmqrunError, ValueError):
    """The ACL file cannot be used; the message names the file and what is wrong."""


@dataclass(frozen=True)
class Account:
    access_key: str
    secret_key: str = field(repr=False)
    white_address: AddressRule
    admin: bool
    default_topic_perm: int
    default_group_perm: int
    #: topic -> perm, and ``%RETRY%group`` -> perm; None when the file lists neither.
    perms: dict[str, int] | None


@dataclass(frozen=True)
class AclConfig:
    path: Path
    accounts: dict[str, Account]
    global_white: tuple[AddressRule, ...]


def parse_perm(value: object, where: str) -> int:
    """A permission word; a missing one is DENY (as in 4.9.8), an unknown one is an error."""
    if value is None:
        return DENY
    word = str(value).strip()
    if word not in _PERM_WORDS:
        raise AclConfigError(f"{where}: permission {word!r} is not one of {', '.join(_PERM_WORDS)}")
    return _PERM_WORDS[word]


def load_acl_file(path: str | Path) -> AclConfig:
    """Read and check an ACL file; any problem raises :class:`AclConfigError` naming it."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise AclConfigError(f"--acl {path}: cannot read it: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise AclConfigError(f"--acl {path}: not UTF-8 text: {exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise AclConfigError(f"--acl {path}: not valid YAML: {exc}") from None
    try:
        return _build(path, data)
    except AddressPatternError as exc:
        raise AclConfigError(f"--acl {path}: {exc}") from None
    except AclConfigError as exc:
        raise AclConfigError(f"--acl {path}: {exc}") from None


def _build(path: Path, data: Any) -> AclConfig:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise AclConfigError("the file must be a mapping with 'accounts' and/or 'globalWhiteRemoteAddresses'")
    unknown = sorted(str(k) for k in data if k not in _TOP_KEYS)
    if unknown:
        raise AclConfigError(f"unknown key(s) {unknown}; valid: {list(_TOP_KEYS)}")
    white = data.get("globalWhiteRemoteAddresses") or []
    if not isinstance(white, list):
        raise AclConfigError("globalWhiteRemoteAddresses must be a list")
    raw_accounts = data.get("accounts") or []
    if not isinstance(raw_accounts, list):
        raise AclConfigError("accounts must be a list")
    if not raw_accounts and not white:
        raise AclConfigError("no accounts and no globalWhiteRemoteAddresses: every request would be refused")
    accounts: dict[str, Account] = {}
    for index, raw in enumerate(raw_accounts):
        account = _account(index, raw)
        if account.access_key in accounts:
            raise AclConfigError(f"accounts[{index}]: accessKey {account.access_key!r} is listed twice")
        accounts[account.access_key] = account
    return AclConfig(path, accounts, tuple(compile_rule(w) for w in white))


def _account(index: int, raw: Any) -> Account:
    where = f"accounts[{index}]"
    if not isinstance(raw, dict):
        raise AclConfigError(f"{where} must be a mapping of {', '.join(_ACCOUNT_KEYS)}")
    unknown = sorted(str(k) for k in raw if k not in _ACCOUNT_KEYS)
    if unknown:
        raise AclConfigError(f"{where}: unknown key(s) {unknown}; valid: {list(_ACCOUNT_KEYS)}")
    access_key = "" if raw.get("accessKey") is None else str(raw["accessKey"])
    where = f"accounts[{index}] ({access_key or 'no accessKey'})"
    secret = "" if raw.get("secretKey") is None else str(raw["secretKey"])
    if len(access_key) <= _KEY_MIN_LENGTH:
        raise AclConfigError(f"{where}: accessKey must be longer than {_KEY_MIN_LENGTH} characters")
    if len(secret) <= _KEY_MIN_LENGTH:
        raise AclConfigError(f"{where}: secretKey must be longer than {_KEY_MIN_LENGTH} characters")
    admin = raw.get("admin", False)
    if isinstance(admin, str) and admin.strip().lower() in ("true", "false"):
        admin = admin.strip().lower() == "true"
    if admin is None:
        admin = False
    if not isinstance(admin, bool):
        raise AclConfigError(f"{where}: admin must be true or false, got {admin!r}")
    perms: dict[str, int] | None = None
    for key, is_group in (("groupPerms", True), ("topicPerms", False)):
        items = raw.get(key)
        if items is None:
            continue
        if not isinstance(items, list):
            raise AclConfigError(f"{where}: {key} must be a list of name=PERM")
        for item in items:
            name, sep, word = str(item).partition("=")
            if not sep or not name.strip() or "=" in word:
                raise AclConfigError(f"{where}: {key} entry {item!r} is not name=PERM (e.g. topicA=SUB)")
            resource = retry_topic(name.strip()) if is_group else name.strip()
            if perms is None:
                perms = {}
            perms[resource] = parse_perm(word, f"{where} {key} {item!r}")
    return Account(
        access_key=access_key,
        secret_key=secret,
        white_address=_rule(where, raw.get("whiteRemoteAddress")),
        admin=admin,
        default_topic_perm=parse_perm(raw.get("defaultTopicPerm"), f"{where} defaultTopicPerm"),
        default_group_perm=parse_perm(raw.get("defaultGroupPerm"), f"{where} defaultGroupPerm"),
        perms=perms,
    )


def _rule(where: str, pattern: object) -> AddressRule:
    try:
        return compile_rule(pattern)
    except AddressPatternError as exc:
        raise AclConfigError(f"{where}: {exc}") from None
