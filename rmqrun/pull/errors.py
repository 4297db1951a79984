"""Errors the pull consumer raises itself.

Transport and broker failures keep their own classes (``rmqrun.remoting.errors``:
``RequestTimeoutError`` names the address that did not answer,
``BrokerError`` keeps the broker's code and remark); these are the ones a
caller of the pull API most often wants to tell apart.
"""

from __future__ import annotations

from rmqrun.client.errors import ClientError, NoRouteError


class TopicNotFoundError(NoRouteError):
    """The name server has no route for the topic, or the route has no readable queue."""

    def __init__(self, topic: str, message: str) -> None:
        super().__init__(message)
        self.topic = topic


class WrongCallerError(ClientError, RuntimeError):
    """The blocking :class:`~rmqrun.pull.PullConsumer` was called where it cannot answer.

    After a fork (its loop thread did not survive it) or from its own loop thread (it
    would wait on itself): either call would hang forever, so it fails at once. A
    ``RuntimeError`` too, as it was before it had a class of its own.
    """


class NotStartedError(ClientError):
    """A call on a consumer that is not started (or already closed)."""


class OffsetPersistError(ClientError):
    """Some updated offsets could not be written to their broker; ``failures`` maps queue to error.

    The offsets that failed stay in the local table as "updated", so a later
    :meth:`persist_consume_offsets` (or ``close()``) tries them again.
    """

    retriable = True

    def __init__(self, message: str, failures: dict) -> None:  # type: ignore[type-arg]
        super().__init__(message)
        self.failures = failures


class MessageNotFoundError(ClientError, LookupError):
    """No broker of the topic has the message asked for by id (:meth:`view_message`).

    ``msg_id`` is the id asked for. A ``LookupError`` too, the standard base for "no such item".
    """

    def __init__(self, msg_id: str, message: str) -> None:
        super().__init__(message)
        self.msg_id = msg_id


class FilterNotSupportedError(ClientError):
    """The broker refuses the pull's expression type (SQL92 on a broker without property filtering).

    A Java broker answers so unless ``enablePropertyFilter=true`` is set in its broker.conf;
    rmqrun's embedded broker always does (it filters by tag only). Retrying cannot help.
    """


class SendBackError(ClientError):
    """:meth:`send_message_back` failed both ways: the broker's send-back and the re-publish
    to ``%RETRY%<group>``. The message was not returned; ``__cause__`` is the send-back's error."""
