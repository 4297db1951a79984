"""Errors of the ``rocketmq`` data source that users see in Spark's exception text."""

from __future__ import annotations

import functools

from rmqrun.errors import RmqrunError


class OptionError(RmqrunError, ValueError):
    """A bad option value; the message names the option."""


class SourceError(RmqrunError, RuntimeError):
    """The source cannot read what it was asked to (topic missing, name server silent, data lost)."""


def plainly(fn):  # type: ignore[no-untyped-def]
    """Re-raise our own errors from here, without the frames below: Spark prints the Python
    traceback in its exception text, and the user needs the message, not our call stack."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):  # type: ignore[no-untyped-def]
        try:
            return fn(*args, **kwargs)
        except (OptionError, SourceError) as e:
            error = type(e)(str(e))
        raise error

    return wrapper
