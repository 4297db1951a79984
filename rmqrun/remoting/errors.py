"""Errors of the wire layer, classified by what the caller should do.

* :class:`ProtocolError` – bytes that are not a valid frame or message; the
  connection that produced them is closed, nothing else is affected.
* :class:`ConnectionClosedError`, :class:`RequestTimeoutError` – transport
  failures; every pending request of a closed connection fails with the same
  ``ConnectionClosedError`` that chains the cause.
* :class:`TlsError` – the TLS handshake failed (certificate not trusted,
  expired, wrong host name, a plain server): not retriable, the settings or
  the server's certificate must change.
* :class:`AccessDeniedError` – the peer refused the request for access
  reasons (ACL): not retriable, names the operation, topic/group and access key.
* :class:`BrokerError` – the peer answered with a non-success response code.
  :func:`error_for_code` maps a code to a subclass whose ``retriable`` and
  ``refresh_route`` flags say whether trying again, or refreshing the route
  first, can help. Unknown codes map to :class:`BrokerError` itself and keep
  their number and remark.
"""

from __future__ import annotations

from rmqrun.errors import RmqrunError
from rmqrun.remoting.codes import ResponseCode, response_name


class RemotingError(RmqrunError):
    """Root of everything the wire layer raises."""

    retriable = False
    refresh_route = False


class ProtocolError(RemotingError):
    """Malformed bytes: a bad frame, header or message body."""


class MissingFieldError(ProtocolError):
    """A typed header's required field is absent from the ext fields.

    Carries the header class's name and the wire name of the field, so a caller that
    answers in another wording (the broker says Java's "the custom field <x> is null")
    reads them instead of parsing this text.
    """

    def __init__(self, header: str, field: str) -> None:
        super().__init__(f"{header}: required field {field!r} is missing")
        self.header = header
        self.field = field


class FrameTooLargeError(ProtocolError):
    """A length prefix outside 0..max_frame_size."""


class PropertyTextError(RemotingError, ValueError):
    """Text a message property cannot carry: a separator of the properties string, or no valid UTF-8.

    Raised before anything is sent, naming the field (``keys``, ``tags``, ``property 'k'``,
    ``--keys``...). A ``ValueError`` too, as every other refusal of a bad send is.
    """


class ConnectionClosedError(RemotingError):
    """The connection closed (or could not be opened) before the answer came."""

    retriable = True


class RequestTimeoutError(RemotingError):
    """No answer within the request's timeout. The connection stays open."""

    retriable = True


class TlsError(ConnectionClosedError):
    """The TLS handshake failed: waiting does not help, a setting or a certificate must change."""

    retriable = False


class BrokerError(RemotingError):
    """A non-success response code, with the peer's remark."""

    def __init__(self, code: int, remark: str | None = None, request_code: int | None = None) -> None:
        self.code = code
        self.remark = remark or ""
        self.request_code = request_code
        shown = self.remark.strip()  # a Java broker's "request type N not supported" starts with a space
        super().__init__(f"{response_name(code)} ({code}): {shown}" if shown else f"{response_name(code)} ({code})")


class AccessDeniedError(BrokerError):
    """The peer refused the request for access reasons (an ACL check failed).

    A 4.x broker answers SYSTEM_ERROR with the ``AclException`` in the remark, a
    5.x one NO_PERMISSION with the authentication/authorization failure. Never
    retriable: the credentials or the permissions must change. ``str()`` names the
    operation, the topic or group and the access key (never a secret) when the
    connection that got it knew the request (:mod:`rmqrun.remoting.refusal`).
    """

    def __init__(self, code: int, remark: str | None = None, request_code: int | None = None,
                 message: str | None = None) -> None:
        super().__init__(code, remark, request_code)
        if message:
            self.args = (message,)


class SystemBusyError(BrokerError):
    retriable = True


class ServiceNotAvailableError(BrokerError):
    retriable = True
    refresh_route = True


class FlowControlError(BrokerError):
    retriable = True


class FlushTimeoutError(BrokerError):
    """The message was stored but not flushed/replicated in time; retrying may duplicate it."""

    retriable = True


class TopicNotExistError(BrokerError):
    refresh_route = True


class NoPermissionError(BrokerError):
    refresh_route = True


class SubscriptionError(BrokerError):
    """Group or subscription unknown to the broker or stale: a heartbeat then retry helps."""

    retriable = True


class QueryNotFoundError(BrokerError):
    """QUERY_NOT_FOUND: e.g. no stored offset for a group."""


class MessageIllegalError(BrokerError):
    pass


class RequestNotSupportedError(BrokerError):
    pass


_CODE_CLASSES: dict[int, type[BrokerError]] = {
    ResponseCode.SYSTEM_BUSY: SystemBusyError,
    ResponseCode.SERVICE_NOT_AVAILABLE: ServiceNotAvailableError,
    ResponseCode.SLAVE_NOT_AVAILABLE: ServiceNotAvailableError,
    ResponseCode.NOT_LEADER_FOR_QUEUE: ServiceNotAvailableError,
    ResponseCode.GO_AWAY: ServiceNotAvailableError,
    ResponseCode.FLOW_CONTROL: FlowControlError,
    ResponseCode.POLLING_FULL: FlowControlError,
    ResponseCode.FLUSH_DISK_TIMEOUT: FlushTimeoutError,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: FlushTimeoutError,
    ResponseCode.TOPIC_NOT_EXIST: TopicNotExistError,
    ResponseCode.NO_PERMISSION: NoPermissionError,
    ResponseCode.SUBSCRIPTION_NOT_EXIST: SubscriptionError,
    ResponseCode.SUBSCRIPTION_NOT_LATEST: SubscriptionError,
    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: SubscriptionError,
    ResponseCode.SUBSCRIPTION_PARSE_FAILED: BrokerError,
    ResponseCode.QUERY_NOT_FOUND: QueryNotFoundError,
    ResponseCode.MESSAGE_ILLEGAL: MessageIllegalError,
    ResponseCode.REQUEST_CODE_NOT_SUPPORTED: RequestNotSupportedError,
}


#: words of a NO_PERMISSION remark that tell an ACL refusal (5.x auth) from a topic or broker
#: whose permission forbids the operation (a state operators set, worth waiting out)
#: ("username cannot be null." is what a 5.x broker answers a request that carries no AccessKey)
_AUTH_WORDS = ("aclexception", "accesskey", "access key", "signature", "authentic", "authoriz", "user:", "no acl",
               "username")


def is_access_refusal(code: int, remark: str | None) -> bool:
    """Whether a response is an ACL refusal (see :class:`AccessDeniedError`)."""
    if code == ResponseCode.SYSTEM_ERROR:
        return bool(remark) and "AclException" in remark  # type: ignore[operator]
    if code == ResponseCode.NO_PERMISSION:
        text = (remark or "").lower()
        return any(w in text for w in _AUTH_WORDS)
    return False


def error_for_code(code: int, remark: str | None = None, request_code: int | None = None) -> BrokerError:
    """The exception for a response code; unknown codes keep their number."""
    if is_access_refusal(code, remark):
        return AccessDeniedError(code, remark, request_code)
    cls = _CODE_CLASSES.get(code, BrokerError)
    return cls(code, remark, request_code)
