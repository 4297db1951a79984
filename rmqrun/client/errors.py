"""Errors the client layer raises itself (wire and broker errors come from rmqrun.remoting.errors).

Like the wire errors they carry ``retriable`` / ``refresh_route`` flags, so a
caller decides what to do from the class, not from the message.
"""

from __future__ import annotations

from rmqrun.errors import RmqrunError


class ClientError(RmqrunError):
    """Root of the client layer's own failures."""

    retriable = False
    refresh_route = False


class NoRouteError(ClientError):
    """No usable queue for a topic (no route, or no writable broker with a master)."""

    refresh_route = True


class BrokerNotFoundError(ClientError):
    """A broker name from a route has no known address (yet)."""

    retriable = True
    refresh_route = True


class NameServerUnavailableError(ClientError):
    """No configured name server could be reached."""

    retriable = True


class SendFailedError(ClientError):
    """Every attempt of a send failed with a retriable error; ``__cause__`` is the last one."""

    def __init__(self, message: str, attempts: int, brokers: list[str]) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.brokers = brokers
