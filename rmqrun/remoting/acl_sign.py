"""ACL 1.0 request signatures (RocketMQ 4.x ``plain_acl``), written from the definition.

A signed request carries three more extension fields: ``AccessKey``,
``SecurityToken`` (only when one is set) and ``Signature``. The signature is

    Base64( HMAC-SHA1( secret_key, content ) )

where ``content`` is the UTF-8 bytes of the values of every extension field
except ``Signature`` (with ``AccessKey`` and ``SecurityToken`` already added),
concatenated in the order of their names, followed by the request body.

One deliberate difference from the Java client: ``_UNIQUE_KEY_QUERY`` (the
flag of a QUERY_MESSAGE by unique key) is left out of the content, because
that is what brokers leave out when they check (4.9.x ``PlainAccessValidator``
and 5.x alike). The Java client signs it and is refused for that reason
(apache/rocketmq#1216, #5310); signing what the broker checks is the only
choice that works. Name order is Java's ``TreeMap`` order (UTF-16 code units),
which equals Python's for every name a request carries.

This module does no I/O and knows nothing of connections: the connection
calls :func:`sign` on each request just before it is encoded.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import Mapping

from rmqrun.remoting.frame import RemotingCommand

ACCESS_KEY = "AccessKey"
SECURITY_TOKEN = "SecurityToken"
SIGNATURE = "Signature"
#: QUERY_MESSAGE's unique-key flag, which brokers leave out of the signed content
UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"
_UNSIGNED = frozenset((SIGNATURE, UNIQUE_KEY_QUERY))


def _java_order(name: str) -> bytes:
    """The sort key of Java's String.compareTo (UTF-16 code units)."""
    return name.encode("utf-16-be", "surrogatepass")


def signed_content(ext_fields: Mapping[str, str], body: bytes | None) -> bytes:
    """The bytes the signature covers: field values by name order, then the body."""
    values = "".join(ext_fields[k] for k in sorted(ext_fields, key=_java_order) if k not in _UNSIGNED)
    return values.encode("utf-8", "surrogatepass") + (body or b"")


def signature(content: bytes, secret_key: str) -> str:
    """Base64 of HMAC-SHA1 of ``content`` under the secret key (UTF-8)."""
    mac = hmac.new(secret_key.encode("utf-8"), content, hashlib.sha1).digest()
    return base64.b64encode(mac).decode("ascii")


def sign(cmd: RemotingCommand, access_key: str, secret_key: str, security_token: str | None = None) -> None:
    """Add ``AccessKey`` (and ``SecurityToken``) and the ``Signature`` over them to ``cmd``.

    Signing again (a request re-sent to another address) gives the same fields:
    an old ``Signature`` is never part of the content.
    """
    fields = cmd.ext_fields
    fields[ACCESS_KEY] = access_key
    if security_token is not None:
        fields[SECURITY_TOKEN] = security_token
    fields[SIGNATURE] = signature(signed_content(fields, cmd.body), secret_key)
