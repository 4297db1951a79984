"""The flags several commands share, spelled once, so a letter or a level means the same everywhere.

Short letters follow the tool a command's users already know. The operator
commands (``topic``, ``offsets``, ``status``, ``produce``, ``read``) take
mqadmin's: ``-n`` the name server, ``-t`` the topic, ``-g`` the group and, in
``topic``, ``-c`` the cluster, ``-b`` the broker, ``-r``/``-w`` the read and
write queues, ``-p`` the permission. The pool commands (``run``, ``check``,
``demo``) take gunicorn's: ``-w`` the workers, ``-c`` the config file; and
mqadmin's ``-n``/``-g``/``-t`` where they overlap. ``-n`` is never a count.
``tests/unit/cli/test_cli_help.py`` holds the table and fails on a letter used
otherwise.

Every option shows its default, its choices or that it is required in
``--help``: :class:`Shown` prints a default that is a description rather
than a value (``$NAMESRV_ADDR``, ``CPU count``) as it is, where click would
put it in parentheses, and one that a setting resolves later (the command's
default stays None so the environment and the config file can still apply).
Kept free of heavy imports: ``--help`` and ``--version`` load no client code.
"""

from __future__ import annotations

from typing import Any, Callable, TypeVar

import click

from rmqrun.errors import ConfigError
from rmqrun.pipe.worker_config import LOG_LEVELS

F = TypeVar("F", bound=Callable[..., Any])

#: loguru's levels, the one set every command's --log-level takes (any case)


class Shown(click.Option):
    """An option whose help shows ``shown`` as its default, and ``required`` (a text) when it is one of a
    set the command needs exactly one of."""

    def __init__(self, *args: Any, shown: str | None = None, required_text: str | None = None,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.shown = shown
        self.required_text = required_text

    def get_help_extra(self, ctx: click.Context) -> Any:
        extra = super().get_help_extra(ctx)
        if self.shown is not None:
            extra["default"] = self.shown
        if self.required_text is not None:
            extra["required"] = self.required_text
        return extra


def choices_metavar(choices: tuple[str, ...] | list[str]) -> str:
    """How click shows a Choice (``[a|b]``), for options whose value is checked by the settings table so its
    error names the source."""
    return "[" + "|".join(choices) + "]"


def check_log_level(value: str, option: str = "--log-level") -> str:
    """The level in upper case, or a ConfigError in the settings table's words."""
    level = value.strip().upper()
    if level not in LOG_LEVELS:
        raise ConfigError(f"{option} {value!r} is invalid: one of {', '.join(LOG_LEVELS)}")
    return level


def log_level_option(default: str) -> Callable[[F], F]:
    """``--log-level`` with the one set of levels, any case."""
    return click.option("--log-level", default=default, show_default=True, metavar=choices_metavar(LOG_LEVELS),
                        help="log level (any case)")


def namesrv_flag(fn: F) -> F:
    """``-n/--namesrv``, as mqadmin spells it."""
    return click.option("-n", "--namesrv", cls=Shown, shown="$NAMESRV_ADDR",
                        help="name server address(es), host:port[;host:port]")(fn)


def config_option(what: str) -> Callable[[F], F]:
    """``--config FILE`` of the operator commands: ``what`` they take from it."""
    return click.option("--config", "config_file", type=click.Path(dir_okay=False), cls=Shown, shown="none",
                        help=f"YAML settings file to take {what} from")


def json_option(what: str = "one JSON object") -> Callable[[F], F]:
    return click.option("--json", "as_json", is_flag=True, help=what)
