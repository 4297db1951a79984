"""The root of every exception rmqrun raises on purpose.

Callers that want to catch "anything rmqrun refused or failed to do" catch
:class:`RmqrunError`; each layer derives its own family from it.
"""


class RmqrunError(Exception):
    """Root exception of rmqrun."""


class ConfigError(RmqrunError):
    """A setting, a config file or a handler reference is invalid."""
