"""``--namespace`` on the commands that name topics and groups (``produce``, ``status``, ``read`` ...).

``rmqrun run`` takes ``namespace`` from the settings table like every other
setting; the one-shot commands share this option instead, with the same
precedence: the flag, else ``RMQRUN_NAMESPACE``, else the ``namespace`` key of
``--config FILE`` (for the commands that take one). A bad value is a
:class:`~rmqrun.errors.ConfigError` naming where it came from (exit 2).
"""

from __future__ import annotations

import os
from typing import Any, Callable, Mapping, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

HELP = "instance namespace of a managed cluster: topics and groups are NAMESPACE%name on the wire, shown plain here"


def namespace_option(fn: F) -> F:
    """The ``--namespace`` flag, passed to the command as ``namespace``."""
    from rmqrun.cli.flags import Shown
    return click.option("--namespace", "namespace", default=None, metavar="NAMESPACE", help=HELP, cls=Shown,
                        shown="$RMQRUN_NAMESPACE, else the config file's namespace, else none")(fn)


def resolve_namespace(flag: str | None, config_file: str | None = None,
                      environ: Mapping[str, str] | None = None) -> str | None:
    """The namespace to use (None: none): the flag, else RMQRUN_NAMESPACE, else the config file."""
    from rmqrun.cli import settings as table
    setting = table.BY_KEY["namespace"]
    env = os.environ if environ is None else environ
    if flag is not None:
        return setting.convert(flag, "command line --namespace")  # type: ignore[no-any-return]
    if env.get(setting.env) is not None:
        return setting.convert(env[setting.env], f"environment {setting.env}")  # type: ignore[no-any-return]
    if config_file:
        value = table.load_file(config_file).get("namespace")
        if value is not None:
            return setting.convert(value, f"config file {config_file}")  # type: ignore[no-any-return]
    return None
