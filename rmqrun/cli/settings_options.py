"""The arguments ``rmqrun run`` and ``rmqrun check`` share: ``HANDLER``, ``--config`` and a flag per setting.

Both commands take exactly the same settings (``check`` verifies what ``run``
would start with), so the flags are generated here, once, from the one
settings table (:mod:`rmqrun.cli.settings`) rather than listed per command.

Each flag's default stays None on the click side (so the environment and the
config file still apply beneath the command line), but ``--help`` shows the
table's default, the choices and a type, not the setting's name as the
placeholder (``--batch-size INTEGER [default: 1]``, not
``--batch-size CONSUME_MESSAGE_BATCH_MAX_SIZE``). Short letters are
gunicorn's where it has them (``-w`` workers, ``-c`` config) and mqadmin's
otherwise (``-n`` name server, ``-g`` group, ``-t`` topic); see
:mod:`rmqrun.cli.flags`.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Callable

import click

from rmqrun.cli.flags import Shown, choices_metavar

if TYPE_CHECKING:
    from rmqrun.cli.settings import Setting

#: setting key -> its short flag
SHORT = {"workers": "-w", "namesrv": "-n", "group": "-g", "topic": "-t"}
#: "(default: X)" or "(default X)" in a help text: shown as the default instead
_DEFAULT_IN_HELP = re.compile(r"\s*\(default:? ([^)]*)\)")
#: an ``allowed`` text that is a list of words ("auto, uvloop or asyncio"): shown as choices
_WORDS = re.compile(r"^[a-z_]+(, [a-z_]+)* or [a-z_]+$")


def help_of(s: "Setting") -> tuple[str, str]:
    """The help text without its "(default ...)" note, and the default to show."""
    found = _DEFAULT_IN_HELP.search(s.help)
    if found:
        return _DEFAULT_IN_HELP.sub("", s.help, count=1), found.group(1)
    if s.default is None:
        from rmqrun.cli.settings import ESSENTIALS
        return s.help, "none (needed)" if s.key in ESSENTIALS else "none"
    if isinstance(s.default, bool):
        return s.help, str(s.default).lower()
    return s.help, str(s.default)


def choices_of(s: "Setting") -> tuple[str, ...] | None:
    """The values a setting takes when they are a short list of words."""
    if s.choices:
        return s.choices
    if s.allowed and _WORDS.match(s.allowed):
        return tuple(re.split(r", | or ", s.allowed))
    return None


def metavar_of(s: "Setting") -> str:
    from rmqrun.cli import values
    choices = choices_of(s)
    if choices:
        return choices_metavar(choices)
    kinds = {values.parse_int: "INTEGER", values.parse_float: "NUMBER", values.parse_size: "SIZE",
             values.parse_ref: "MODULE:FUNCTION", values.parse_namesrv: "HOST:PORT[;...]"}
    return kinds.get(s.parse, "TEXT")


def setting_option(s: "Setting", fn: Callable[..., Any]) -> Callable[..., Any]:
    """``s``'s flag on ``fn``: its short letter, its type, its default and choices shown."""
    assert s.flag is not None
    decls = [d for d in (SHORT.get(s.key), s.flag) if d]
    text, shown = help_of(s)
    if s.is_flag:
        return click.option(*decls, s.key, is_flag=True, default=None, help=text)(fn)
    return click.option(*decls, s.key, default=None, help=text, metavar=metavar_of(s), multiple=s.multiple,
                        cls=Shown, shown=shown)(fn)


def settings_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``HANDLER``, ``-c/--config`` and a flag per setting that has one (from the settings table)."""
    from rmqrun.cli.settings import SETTINGS
    for s in reversed(SETTINGS):
        if s.flag is not None:
            fn = setting_option(s, fn)
    fn = click.option("-c", "--config", "config_file", type=click.Path(dir_okay=False), cls=Shown, shown="none",
                      help="YAML file of settings (see config/example.yaml)")(fn)
    return click.argument("handler", required=False)(fn)
