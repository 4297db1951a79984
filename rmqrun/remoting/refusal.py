"""An ACL refusal as one clear line: the operation, the topic or group, the access key.

A 4.9.x broker's remark is ``org.apache.rocketmq.acl.common.AclException: <why>, <stack frame>``;
the line keeps ``<why>``. The access key is the one the request carried
(``AccessKey``); the secret is never part of a request's fields, so it can
never reach this text.
"""

from __future__ import annotations

import json
import re

from rmqrun.remoting.acl_sign import ACCESS_KEY
from rmqrun.remoting.codes import RequestCode, request_name
from rmqrun.remoting.errors import AccessDeniedError
from rmqrun.remoting.frame import RemotingCommand

_TOPIC_FIELDS = ("topic",)
_GROUP_FIELDS = ("consumerGroup", "group", "producerGroup")
_V2_SENDS = (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE)
#: the stack frame a 4.x broker appends (RemotingHelper.exceptionSimpleDesc): ", pkg.Class.method(File.java:1)"
_FRAME = re.compile(r", [A-Za-z_$][\w$]*(\.[\w$<>]+)+(\([^)]*\))?$")


def _why(remark: str | None) -> str:
    text = (remark or "").strip()
    marker = "AclException: "
    if marker in text:
        text = _FRAME.sub("", text.split(marker, 1)[1])
    return text or "no reason given"


def _heartbeat_groups(body: bytes | None) -> list[str]:
    try:
        data = json.loads(body or b"{}")
    except (ValueError, UnicodeDecodeError):
        return []
    groups = [c.get("groupName") for c in data.get("consumerDataSet") or [] if isinstance(c, dict)]
    groups += [p.get("groupName") for p in data.get("producerDataSet") or [] if isinstance(p, dict)]
    # a consumer's group is also its re-publishing producer's: each group once
    return list(dict.fromkeys(g for g in groups if g and g != "CLIENT_INNER_PRODUCER"))


def subjects(cmd: RemotingCommand) -> str:
    """``topic T, group G`` as far as the request names them ('' when it names neither)."""
    ext = cmd.ext_fields
    topic = ext.get("b") if cmd.code in _V2_SENDS else next((ext[f] for f in _TOPIC_FIELDS if ext.get(f)), None)
    group = ext.get("a") if cmd.code in _V2_SENDS else next((ext[f] for f in _GROUP_FIELDS if ext.get(f)), None)
    parts = []
    if topic:
        parts.append(f"topic {topic}")
    if group:
        parts.append(f"group {group}")
    elif cmd.code == RequestCode.HEART_BEAT:
        groups = _heartbeat_groups(cmd.body)
        if groups:
            parts.append(("groups " if len(groups) > 1 else "group ") + ", ".join(groups))
    return ", ".join(parts)


def refusal_error(address: str, cmd: RemotingCommand, resp: RemotingCommand) -> AccessDeniedError:
    """The non-retriable error for a refused request, with the line that says what to fix."""
    what = subjects(cmd)
    key = cmd.ext_fields.get(ACCESS_KEY)
    who = f"access key {key}" if key else "no access key (set access_key and secret_key)"
    message = (f"access denied by {address}: {request_name(cmd.code)}"
               f"{f' ({what})' if what else ''} with {who}: {_why(resp.remark)}")
    return AccessDeniedError(resp.code, resp.remark, cmd.code, message=message)
