"""ACL test helpers written from the ACL 1.0 definition (not from rmqrun's code).

``sign(cmd, ak, sk)`` adds ``AccessKey`` (and ``SecurityToken``) to a request
and a ``Signature`` computed here with hmac/hashlib/base64: the values of all
extension fields ordered by name, concatenated, then the body, HMAC-SHA1
under the secret, Base64. ``write_acl(path, text)`` writes a ``plain_acl.yml``.

ACCOUNTS_YAML is a file with one account of each kind the broker tests need.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import textwrap
from pathlib import Path

from rmqrun.remoting.frame import RemotingCommand

ADMIN_AK, ADMIN_SK = "rocketmq2", "12345678"          # the 4.9.8 tools' default account
USER_AK, USER_SK = "RocketMQUser", "user-secret-1"    # a non-admin with per-topic/group permissions

ACCOUNTS_YAML = f"""\
accounts:
  - accessKey: {ADMIN_AK}
    secretKey: {ADMIN_SK}
    admin: true
  - accessKey: {USER_AK}
    secretKey: {USER_SK}
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - OpenTopic=PUB|SUB
      - ReadOnlyTopic=SUB
      - ClosedTopic=DENY
    groupPerms:
      - ClosedGroup=DENY
      - OpenGroup=SUB
"""


def signature_of(ext_fields: dict[str, str], body: bytes | None, secret_key: str) -> str:
    content = "".join(ext_fields[k] for k in sorted(ext_fields) if k != "Signature").encode("utf-8")
    content += body or b""
    return base64.b64encode(hmac.new(secret_key.encode("utf-8"), content, hashlib.sha1).digest()).decode()


def sign(cmd: RemotingCommand, access_key: str, secret_key: str, token: str | None = None) -> RemotingCommand:
    cmd.ext_fields["AccessKey"] = access_key
    if token is not None:
        cmd.ext_fields["SecurityToken"] = token
    cmd.ext_fields.pop("Signature", None)
    cmd.ext_fields["Signature"] = signature_of(cmd.ext_fields, cmd.body, secret_key)
    return cmd


def write_acl(path: Path, text: str = ACCOUNTS_YAML) -> Path:
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path
