"""The root of every exception rmqrun raises on purpose.

Callers that want to catch "anything rmqrun refused or failed to do" catch
:class:`RmqrunError`; each layer derives its own family from it. A class that
users (or rmqrun's own callers) also catch by a standard base keeps that base
beside the root, e.g. ``class OptionError(RmqrunError, ValueError)``, so both
``except RmqrunError`` and ``except ValueError`` see it.
``tests/unit/test_exception_root.py`` imports every module and fails on a class
outside the tree.

One class stands outside on purpose: :class:`rmqrun.handler.results.WorkerTerminated`
is a ``BaseException`` raised inside a handler when its worker must stop now
(SIGTERM). It is a control-flow signal, like ``KeyboardInterrupt``, not an error:
a handler's ``except Exception`` (and so ``except RmqrunError``) must not swallow
it, or the worker could not stop. The test names it, with this reason.
"""


class RmqrunError(Exception):
    """Root exception of rmqrun."""


class ConfigError(RmqrunError):
    """A setting, a config file or a handler reference is invalid."""
