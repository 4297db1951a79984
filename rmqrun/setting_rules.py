"""A setting's default and check, written once: on the dataclass field that holds the value.

The settings dataclasses (``ConsumerConfig``, ``WorkerConfig``, ``PoolConfig``, ``RunSettings``) declare each
field's default and, where values are limited, its :class:`Rule`: what is accepted and the words that say so.
The settings table of ``rmqrun run`` (``rmqrun/cli/settings.py``) sits above all of them and reads both from
the field, so a value from a flag, a variable or a YAML file and one given to the dataclass directly are held
to the same rule, and ``--help``, the configuration reference and the error show the same words. The direction
is forced by the layers: the dataclasses are built directly by programs, tests and the demo (they need their
defaults without the command line), and nothing below ``cli/`` may import the table.

It stands at the bottom of the package (it imports only the exception root) so every layer's settings can use it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import MISSING, dataclass
from typing import Any, Callable

from rmqrun.errors import ConfigError

__all__ = ["RULE", "Rule", "at_least", "between", "check_fields", "one_of", "positive", "rule_of", "ruled",
           "words"]

#: the key of a field's :class:`Rule` in its ``metadata``
RULE = "rmqrun.rule"


@dataclass(frozen=True)
class Rule:
    """What a setting accepts (``ok``) and how an error and the reference say it (``allowed``)."""

    ok: Callable[[Any], bool]
    allowed: str
    #: upper-case words the value must be one of (the command line takes them in any case)
    choices: tuple[str, ...] | None = None


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def between(lo: int, hi: int) -> Callable[[Any], bool]:
    """An integer from ``lo`` to ``hi``."""
    return lambda v: _integer(v) and lo <= v <= hi


def at_least(lo: float) -> Callable[[Any], bool]:
    """A number of at least ``lo``."""
    return lambda v: _number(v) and v >= lo


def positive(value: Any) -> bool:
    """A number above 0."""
    return _number(value) and value > 0


def one_of(*choices: str) -> Rule:
    """One of these upper-case words (``CLUSTERING``, ``BROADCASTING``)."""
    return Rule(lambda v: v in choices, f"one of {', '.join(choices)}", choices)


def words(*choices: str) -> Rule:
    """One of these lower-case words, said as ``a, b or c``."""
    said = ", ".join(choices[:-1]) + f" or {choices[-1]}" if len(choices) > 1 else choices[0]
    return Rule(lambda v: v in choices, said)


def ruled(default: Any = MISSING, *, ok: Callable[[Any], bool] | Rule,
          allowed: str = "", default_factory: Any = MISSING, **kw: Any) -> Any:
    """A dataclass field with its default and its :class:`Rule` (``ok`` a predicate with ``allowed``, or a
    Rule made by :func:`one_of` / :func:`words`)."""
    rule = ok if isinstance(ok, Rule) else Rule(ok, allowed)
    return dataclasses.field(default=default, default_factory=default_factory, metadata={RULE: rule}, **kw)


def rule_of(f: dataclasses.Field[Any]) -> Rule | None:
    return f.metadata.get(RULE)


def check_fields(obj: Any) -> None:
    """Refuse the first field whose value breaks its rule, naming the field, the value and what is allowed.
    None is never checked: it means "derived" (a default computed from another value)."""
    for f in dataclasses.fields(obj):
        rule = rule_of(f)
        value = getattr(obj, f.name)
        if rule is not None and value is not None and not rule.ok(value):
            raise ConfigError(f"{f.name}={value!r} is invalid: {rule.allowed}")
