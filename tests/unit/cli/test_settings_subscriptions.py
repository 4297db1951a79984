"""Several subscriptions in the settings table: repeated ``--topic``, ``subscriptions:``, and what is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from rmqrun.cli import settings as table
from rmqrun.errors import ConfigError

BASE = {"handler": "workers.noop:handle", "namesrv": "127.0.0.1:9876", "group": "G"}


def subs(cli: dict[str, object], *, config: Path | None = None, environ: dict[str, str] | None = None) -> object:
    resolved = table.resolve({**BASE, **cli}, config_file=config, environ=environ or {})
    return table.build(resolved).consumer.subscriptions


def test_one_topic_keeps_the_tags_setting() -> None:
    assert subs({"topic": ("A",), "tags": "X || Y"}) == {"A": "X || Y"}
    assert subs({"topic": "A"}) == {"A": "*"}


def test_repeated_topics_with_their_own_tags() -> None:
    assert subs({"topic": ("A:X || Y", "B", "C:*")}) == {"A": "X || Y", "B": "*", "C": "*"}
    assert subs({"topic": ("A:X",)}) == {"A": "X"}


def test_yaml_map_and_environment_text(tmp_path: Path) -> None:
    cfg = tmp_path / "s.yaml"
    cfg.write_text("subscriptions:\n  A: 'X || Y'\n  B:\n")
    assert subs({}, config=cfg) == {"A": "X || Y", "B": "*"}
    assert subs({}, environ={"RMQRUN_SUBSCRIPTIONS": "{A: X, B: '*'}"}) == {"A": "X", "B": "*"}


def test_the_stronger_source_wins_between_topic_and_subscriptions(tmp_path: Path) -> None:
    cfg = tmp_path / "s.yaml"
    cfg.write_text("subscriptions: {A: X, B: Y}\n")
    assert subs({"topic": ("C",)}, config=cfg) == {"C": "*"}  # command line over the file
    cfg.write_text("topic: C\n")
    assert subs({"topic": ("A:X", "B")}, config=cfg) == {"A": "X", "B": "*"}
    assert subs({}, config=cfg, environ={"RMQRUN_SUBSCRIPTIONS": "{A: X}"}) == {"A": "X"}


@pytest.mark.parametrize(("cli", "environ", "message"), [
    ({"topic": ("A", "B"), "tags": "X"}, {}, "tags (command line --tags) cannot be combined with several topics"),
    ({"topic": ("A", "a", "A:X")}, {}, "--topic A is given twice"),
    ({"topic": ("A:",)}, {}, None),  # empty tags after ':' mean every tag
    ({}, {"RMQRUN_TOPIC": "A", "RMQRUN_SUBSCRIPTIONS": "{B: X}"},
     "topic (environment RMQRUN_TOPIC) and subscriptions (environment RMQRUN_SUBSCRIPTIONS) are both set"),
    ({}, {"RMQRUN_SUBSCRIPTIONS": "A"}, "subscriptions='A' (environment RMQRUN_SUBSCRIPTIONS) is invalid"),
    ({"topic": ("A:X||",)}, {}, None),  # a trailing '||' leaves one tag, as in Java
    ({"topic": ("A:||",)}, {}, "a tag expression needs at least one tag"),
])
def test_refused_where_ambiguous(cli: dict[str, object], environ: dict[str, str], message: str | None) -> None:
    if message is None:
        subs(cli, environ=environ)
        return
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        subs(cli, environ=environ)


def test_missing_topic_is_satisfied_by_subscriptions() -> None:
    resolved = table.resolve({**BASE, "subscriptions": {"A": "*"}}, environ={})
    assert table.missing(resolved) is None
    gap = table.missing(table.resolve(BASE, environ={}))
    assert gap is not None and "topic (--topic)" in str(gap)
