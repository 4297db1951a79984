"""The arguments ``rmqrun run`` and ``rmqrun check`` share: ``HANDLER``, ``--config`` and a flag per setting.

Both commands take exactly the same settings (``check`` verifies what ``run``
would start with), so the flags are generated here, once, from the one
settings table (:mod:`rmqrun.cli.settings`) rather than listed per command.
"""

from __future__ import annotations

from typing import Any, Callable

import click


def settings_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``HANDLER``, ``--config`` and a flag per setting that has one (from the settings table)."""
    from rmqrun.cli.settings import SETTINGS
    for s in reversed(SETTINGS):
        if s.flag is None:
            continue
        if s.is_flag:
            fn = click.option(s.flag, s.key, is_flag=True, default=None, help=s.help)(fn)
        elif s.multiple:
            fn = click.option(s.flag, s.key, multiple=True, help=s.help, metavar=s.key.upper())(fn)
        else:
            fn = click.option(s.flag, s.key, default=None, help=s.help, metavar=s.key.upper())(fn)
    fn = click.option("--config", "config_file", type=click.Path(dir_okay=False),
                      help="YAML file of settings (see config/example.yaml)")(fn)
    return click.argument("handler", required=False)(fn)
