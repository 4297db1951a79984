"""Errors of the ``rocketmq`` data source that users see in Spark's exception text."""

from __future__ import annotations


class OptionError(ValueError):
    """A bad option value; the message names the option."""


class SourceError(RuntimeError):
    """The source cannot read what it was asked to (topic missing, name server silent, data lost)."""
