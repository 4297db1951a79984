"""How a setting of the table reads in ``--help`` and ``--help-settings``: its short letter, its default as
text, its choices and a placeholder naming its type.

Kept apart from :mod:`rmqrun.cli.settings` (which renders ``--help-settings``) and
:mod:`rmqrun.cli.settings_options` (which makes the flags) so both use it without importing each other; it
reads a setting's fields only and imports neither.
"""

from __future__ import annotations

import re
from typing import Any

from rmqrun.cli.flags import choices_metavar

#: setting key -> its short flag
SHORT = {"workers": "-w", "namesrv": "-n", "group": "-g", "topic": "-t"}
#: "(default: X)" or "(default X)" in a help text: shown as the default instead
_DEFAULT_IN_HELP = re.compile(r"\s*\(default:? ([^)]*)\)")
#: an ``allowed`` text that is a list of words ("auto, uvloop or asyncio"): shown as choices
_WORDS = re.compile(r"^[a-z_]+(, [a-z_]+)* or [a-z_]+$")


def help_of(s: Any, needed: bool = False) -> tuple[str, str]:
    """The help text without its "(default ...)" note, and the default to show (``needed``: run cannot start
    without the setting)."""
    found = _DEFAULT_IN_HELP.search(s.help)
    if found:
        return _DEFAULT_IN_HELP.sub("", s.help, count=1), found.group(1)
    if s.default is None:
        return s.help, "none (needed)" if needed else "none"
    if isinstance(s.default, bool):
        return s.help, str(s.default).lower()
    return s.help, str(s.default)


def choices_of(s: Any) -> tuple[str, ...] | None:
    """The values a setting takes when they are a short list of words."""
    if s.choices:
        return s.choices
    if s.allowed and _WORDS.match(s.allowed):
        return tuple(re.split(r", | or ", s.allowed))
    return None


def metavar_of(s: Any) -> str:
    from rmqrun.cli import values
    choices = choices_of(s)
    if choices:
        return choices_metavar(choices)
    kinds = {values.parse_int: "INTEGER", values.parse_float: "NUMBER", values.parse_size: "SIZE",
             values.parse_ref: "MODULE:FUNCTION", values.parse_namesrv: "HOST:PORT[;...]"}
    return kinds.get(s.parse, "TEXT")
