"""The exit codes of every ``rmqrun`` command, and the one mapping from an exception to its code.

======  ======================================================================================
code    meaning
======  ======================================================================================
0       success (``run``: stopped by SIGTERM/SIGINT after a graceful stop)
1       a runtime failure: the cluster cannot answer or refuses (ACL, TLS), failed sends, the
        worker pool gave up, a busy metrics port, a data directory in use or a full disk, an
        unexpected error. The systemd unit restarts it: the setting is right, the moment is not
2       an invalid or missing setting (flag, ``RMQRUN_*`` variable, YAML key), named in the
        message; also a ``--data-dir`` that is a file or not writable. Never restarted
3       the handler or a worker hook cannot be loaded at start. Never restarted
130     interrupted (Ctrl-C) where a command reports it (``demo``, ``read``, ``spark``)
======  ======================================================================================

``config/README.md`` ("Exit codes") has the same table for operators; the
supervisor's own ``EXIT_BOOT`` (3) and the worker's boot-error code are the
same number. ``rmqrun run`` never exits for an unreachable cluster: it waits.

Commands decide nothing about codes themselves: they let a :class:`ConfigError`
reach the group (:mod:`rmqrun.cli.main`), or call :func:`fail` with the
exception they caught and the sentence that gives it context. The code comes
from the exception's type (and, for a data directory, from the ``OSError``
behind it), never from its text.
"""

from __future__ import annotations

import errno
import sys
from typing import NoReturn

import click

from rmqrun.errors import ConfigError

EXIT_OK = 0
EXIT_RUNTIME = 1
EXIT_CONFIG = 2
EXIT_HANDLER = 3
EXIT_INTERRUPTED = 130

#: a full disk (or quota) under a data directory: the setting is right, the moment is not
_FULL_DISK = (errno.ENOSPC, errno.EDQUOT)


def exit_code_for(exc: BaseException) -> int:
    """The exit code of a command that stops on ``exc`` (see the module docstring's table)."""
    # imported here: ``rmqrun --version`` and ``--help`` load neither the worker nor the broker
    from rmqrun.broker.store.errors import DataDirError, StoreLockedError
    from rmqrun.handler.loading import HandlerLoadError

    if isinstance(exc, HandlerLoadError):
        return EXIT_HANDLER
    if isinstance(exc, ConfigError):
        return EXIT_CONFIG
    if isinstance(exc, KeyboardInterrupt):
        return EXIT_INTERRUPTED
    if isinstance(exc, DataDirError):
        # in use or a full disk: runtime (1); a file or a read-only directory: --data-dir must change (2)
        cause = exc.__cause__
        full = isinstance(cause, OSError) and cause.errno in _FULL_DISK
        return EXIT_RUNTIME if isinstance(exc, StoreLockedError) or full else EXIT_CONFIG
    return EXIT_RUNTIME


def error_line(text: str) -> None:
    """``rmqrun: error: <text>`` on stderr: one line, what the tests and operators grep for."""
    click.echo(f"rmqrun: error: {text}", err=True)


def fail(exc: BaseException, text: str | None = None) -> NoReturn:
    """Say what went wrong (``text``, else the exception or its type's name) and exit with its code."""
    # ``exc or name`` would never fall back (an exception is always true): an empty text says the type instead
    error_line(text if text is not None else str(exc) or type(exc).__name__)
    sys.exit(exit_code_for(exc))
