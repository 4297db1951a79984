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

from typing import TYPE_CHECKING, Any, Callable

import click

from rmqrun.cli.flags import Shown
from rmqrun.cli.setting_help import SHORT, help_of, metavar_of

if TYPE_CHECKING:
    from rmqrun.cli.settings import Setting


def setting_option(s: "Setting", fn: Callable[..., Any]) -> Callable[..., Any]:
    """``s``'s flag on ``fn``: its short letter, its type, its default and choices shown."""
    from rmqrun.cli.settings import ESSENTIALS
    assert s.flag is not None
    decls = [d for d in (SHORT.get(s.key), s.flag) if d]
    text, shown = help_of(s, needed=s.key in ESSENTIALS)
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
