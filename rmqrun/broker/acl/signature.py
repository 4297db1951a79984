"""The ACL 1.0 request signature, checked on the broker side.

Written from the algorithm's definition, not from any client code: the
signed content is the values of the request's extension fields (every field
but ``Signature`` itself, so ``AccessKey`` and ``SecurityToken`` are in it),
taken in the order of their names, concatenated as UTF-8 text, followed by
the raw body; the signature is the Base64 of HMAC-SHA1 over that content
keyed with the account's secret key (UTF-8).

Names are ordered as Java's ``String.compareTo`` orders them (UTF-16 code
units), which differs from Python's code-point order only beyond the BMP;
sorting on the UTF-16-BE bytes gives Java's order exactly.

One deliberate difference from a 4.9.8 broker: that broker leaves the
``_UNIQUE_KEY_QUERY`` field out of the content while every client signs it
(apache/rocketmq#5310, #5636: ``mqadmin queryMsgByKey`` is refused by a 4.9.8
broker with ACL on). The embedded broker accepts the signature computed
either way, so real tools work against it; both are keyed with the secret.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import Mapping

SIGNATURE = "Signature"
ACCESS_KEY = "AccessKey"
SECURITY_TOKEN = "SecurityToken"
UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"


def _java_order(name: str) -> bytes:
    return name.encode("utf-16-be", "surrogatepass")


def signed_content(ext_fields: Mapping[str, str], body: bytes | None, *, leave_out: frozenset[str] = frozenset()
                   ) -> bytes:
    """The bytes a signature covers: field values by field name, then the body."""
    names = sorted((k for k in ext_fields if k != SIGNATURE and k not in leave_out), key=_java_order)
    text = "".join(ext_fields[k] for k in names)
    return text.encode("utf-8") + (body or b"")


def compute(content: bytes, secret_key: str) -> str:
    """Base64(HMAC-SHA1(secret, content)), the form carried in the ``Signature`` field."""
    digest = hmac.new(secret_key.encode("utf-8"), content, hashlib.sha1).digest()
    return base64.b64encode(digest).decode("ascii")


def matches(ext_fields: Mapping[str, str], body: bytes | None, secret_key: str) -> bool:
    """Whether the request's ``Signature`` is the one its content and ``secret_key`` give."""
    given = ext_fields.get(SIGNATURE)
    if given is None:
        return False
    candidates = [signed_content(ext_fields, body)]
    if UNIQUE_KEY_QUERY in ext_fields:
        candidates.append(signed_content(ext_fields, body, leave_out=frozenset({UNIQUE_KEY_QUERY})))
    given_bytes = given.encode("utf-8")
    ok = False
    for content in candidates:  # no early exit: the time taken does not tell which form matched
        ok |= hmac.compare_digest(compute(content, secret_key).encode("ascii"), given_bytes)
    return ok
