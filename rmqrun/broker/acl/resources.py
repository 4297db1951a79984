"""What each request needs of the ACL: the topics and groups it touches, and how.

The rules are in the request specs (:mod:`rmqrun.protocol.requests`, 4.9.8's ``PlainAccessValidator`` and
5.x's POP headers), read from each code's typed header; this module turns a spec's answer into the ACL's
permission bits. A code without a spec needs only a valid signature.
"""

from __future__ import annotations

from rmqrun.broker.acl.config import PUB, SUB
from rmqrun.protocol.requests import RequestUnreadable, admin_codes, spec_of
from rmqrun.remoting.frame import RemotingCommand
from rmqrun.topic_names import is_retry_topic

__all__ = ["ADMIN_CODES", "RequestUnreadable", "is_group_resource", "needed"]

#: Codes only an ``admin: true`` account may send (4.9.8's Permission.ADMIN_CODE).
ADMIN_CODES = admin_codes()

_BITS = {"PUB": PUB, "SUB": SUB}


def is_group_resource(resource: str) -> bool:
    """A group is checked as its retry topic."""
    return is_retry_topic(resource)


def needed(cmd: RemotingCommand) -> dict[str, int]:
    """Resource -> permission the request needs (later entries for the same name win, as in 4.9.8)."""
    spec = spec_of(cmd.code)
    if spec is None:
        return {}
    out: dict[str, int] = {}
    for resource, access in spec.acl_needs(cmd.ext_fields, cmd.body):
        out[resource] = _BITS[access]
    return out
