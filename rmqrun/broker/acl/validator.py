"""The broker's ACL check: one request in, nothing or a refusal out.

The order is a 4.9.8 broker's (``PlainAccessValidator`` and
``PlainPermissionManager.validate``), because the order decides which
answer a client gets:

1. read what the request touches (an unreadable request is refused);
2. a client on a global white address passes, whatever it sent;
3. no ``AccessKey`` field: "No accessKey is configured";
4. an access key not in the file: "No acl config for <key>";
5. a client on the account's own white address passes without a signature;
6. a signature that does not match: "Check signature failed for accessKey=<key>";
7. a PUB request on RMQ_SYS_TRACE_TOPIC (message traces) passes;
8. an admin code from a non-admin account: "Need admin permission ...";
9. each resource against the account's permission for it, else its default
   (topics and groups have separate defaults); an admin account without any
   listed permission may do anything; DENY never passes.

A refusal is answered as 4.9.8 answers the ``AclException`` its hook
throws: response code SYSTEM_ERROR (1) with the exception's class and
message in the remark. It is logged with the client's address the first
time that address gets that refusal (later ones at DEBUG, so a client
retrying in a loop cannot flood the log), and the request never reaches a
processor, so nothing is stored or changed. A oneway request gets no answer,
as in Java.
"""

from __future__ import annotations

from loguru import logger

from rmqrun.broker.acl import signature
from rmqrun.broker.acl.config import ANY, DENY, PUB, SUB, AclConfig, Account
from rmqrun.broker.acl.resources import ADMIN_CODES, RequestUnreadable, is_group_resource, needed
from rmqrun.errors import RmqrunError
from rmqrun.remoting.codes import ResponseCode, request_name
from rmqrun.remoting.connection import Connection
from rmqrun.remoting.frame import RemotingCommand
from rmqrun.topic_names import TRACE_TOPIC, group_of_retry_topic

#: The class name a Java broker puts in front of the message; clients recognise ACL refusals by it.
ACL_EXCEPTION = "org.apache.rocketmq.acl.common.AclException"
_LOGGED_MAX = 10_000
#: Where Java names the first stack frame, the embedded broker names its check.
_WHERE = "rmqrun.broker.acl.validator.AclValidator.check"


class AclRefused(RmqrunError):
    """A request the ACL does not let through; ``str()`` is 4.9.8's message."""


def perm_allows(needed_perm: int, owned: int) -> bool:
    """Permission.checkPermission: DENY never passes; ANY is PUB or SUB; else the bit must be owned."""
    if owned & DENY:
        return False
    if needed_perm & ANY:
        return bool(owned & (PUB | SUB))
    return bool(needed_perm & owned)


def _printable(resource: str) -> str:
    if is_group_resource(resource):
        return "group:" + group_of_retry_topic(resource)
    return "topic:" + resource


class AclValidator:
    def __init__(self, config: AclConfig) -> None:
        self.config = config
        self._logged: set[tuple[str, str]] = set()
        #: Refusals answered so far (tests and status can read it).
        self.refused = 0

    # ------------------------------------------------------------------ the check

    def check(self, cmd: RemotingCommand, client_ip: str) -> None:
        """Return if ``cmd`` from ``client_ip`` may pass; raise :class:`AclRefused` otherwise."""
        try:
            wanted = needed(cmd)
        except RequestUnreadable as exc:
            raise AclRefused(str(exc)) from None
        if any(rule.matches(client_ip) for rule in self.config.global_white):
            return
        ext = cmd.ext_fields
        access_key = ext.get(signature.ACCESS_KEY)
        if access_key is None:
            raise AclRefused("No accessKey is configured")
        account = self.config.accounts.get(access_key)
        if account is None:
            raise AclRefused(f"No acl config for {access_key}")
        if account.white_address.matches(client_ip):
            return
        if not signature.matches(ext, cmd.body, account.secret_key):
            raise AclRefused(f"Check signature failed for accessKey={access_key}")
        if wanted.get(TRACE_TOPIC) == PUB:
            return
        self._check_perms(cmd.code, wanted, account)

    @staticmethod
    def _check_perms(code: int, wanted: dict[str, int], account: Account) -> None:
        if code in ADMIN_CODES and not account.admin:
            raise AclRefused(f"Need admin permission for request code={code}, but accessKey={account.access_key} "
                             "is not")
        if not wanted or (account.perms is None and account.admin):
            return
        for resource, perm in wanted.items():
            group = is_group_resource(resource)
            owned = account.perms.get(resource) if account.perms is not None else None
            if owned is None:
                owned = account.default_group_perm if group else account.default_topic_perm
            if not perm_allows(perm, owned):
                raise AclRefused(f"No default permission for {_printable(resource)}")

    # ------------------------------------------------------------------ the server hook

    def guard(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand | None:
        """The remoting server's hook: None lets the request through, a response refuses it."""
        client_ip = client_host(conn)
        try:
            self.check(cmd, client_ip)
        except AclRefused as refusal:
            self.refused += 1
            self._log(conn.name, cmd, str(refusal))
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"{ACL_EXCEPTION}: {refusal}, {_WHERE}")
        return None

    def _log(self, address: str, cmd: RemotingCommand, reason: str) -> None:
        key = (address, reason)
        if key in self._logged:
            logger.debug("ACL refused {}({}) from {}: {}", request_name(cmd.code), cmd.code, address, reason)
            return
        if len(self._logged) >= _LOGGED_MAX:
            self._logged.clear()
        self._logged.add(key)
        logger.warning("ACL refused {}({}) from {}: {} (further refusals of this client for this reason are "
                       "logged at DEBUG)", request_name(cmd.code), cmd.code, address, reason)


def client_host(conn: Connection) -> str:
    """The client's IP without the port (what white addresses are matched against)."""
    name = conn.name
    host = name.rpartition(":")[0] if ":" in name else name
    return host.strip("[]")
