"""``sql`` (``--sql``, ``RMQRUN_SQL``, ``sql:``): a topic subscribed by an SQL92 selector instead of tags."""

from __future__ import annotations

from pathlib import Path

import pytest

from rmqrun.cli import settings as table
from rmqrun.consumer.config import ConsumerConfig
from rmqrun.errors import ConfigError

BASE = {"handler": "workers.noop:handle", "namesrv": "127.0.0.1:9876", "group": "G"}
SELECTOR = "region = 'eu' AND amount > 100"


def consumer(cli: dict[str, object], *, config: Path | None = None,
             environ: dict[str, str] | None = None) -> ConsumerConfig:
    resolved = table.resolve({**BASE, **cli}, config_file=config, environ=environ or {})
    return table.build(resolved).consumer


def test_the_topic_is_subscribed_by_the_selector() -> None:
    c = consumer({"topic": ("Orders",), "sql": SELECTOR})
    assert c.subscriptions == {"Orders": SELECTOR}
    assert c.expression_types == {"Orders": "SQL92"}
    assert c.expression_type("Orders") == "SQL92" and c.expression_type("%RETRY%G") == "TAG"
    assert c.expression_label("Orders", SELECTOR) == f"SQL92: {SELECTOR}"
    assert c.all_subscriptions() == {"Orders": SELECTOR, "%RETRY%G": "*"}  # the retry topic keeps every tag


def test_from_the_environment_and_a_file(tmp_path: Path) -> None:
    assert consumer({"topic": "Orders"}, environ={"RMQRUN_SQL": SELECTOR}).expression_types == {"Orders": "SQL92"}
    cfg = tmp_path / "s.yaml"
    cfg.write_text(f"topic: Orders\nsql: \"{SELECTOR}\"\n")
    c = consumer({}, config=cfg)
    assert c.subscriptions == {"Orders": SELECTOR} and c.expression_types == {"Orders": "SQL92"}


def test_tags_and_sql_the_stronger_source_wins_and_the_same_source_is_refused(tmp_path: Path) -> None:
    cfg = tmp_path / "s.yaml"
    cfg.write_text("topic: Orders\ntags: 'A || B'\n")
    c = consumer({"sql": SELECTOR}, config=cfg)  # the command line's selector over the file's tags
    assert c.subscriptions == {"Orders": SELECTOR} and c.expression_types == {"Orders": "SQL92"}
    c = consumer({"tags": "C"}, config=cfg, environ={"RMQRUN_SQL": SELECTOR})  # command-line tags over the env
    assert c.subscriptions == {"Orders": "C"} and c.expression_types == {}
    with pytest.raises(ConfigError, match=r"sql \(command line --sql\) and tags \(command line --tags\) are both set"):
        consumer({"topic": "Orders", "sql": SELECTOR, "tags": "A"})
    # tags of '*' filter nothing (config/example.yaml writes them): the selector goes with them, same source or not
    cfg.write_text(f"topic: Orders\ntags: '*'\nsql: \"{SELECTOR}\"\n")
    assert consumer({}, config=cfg).expression_types == {"Orders": "SQL92"}


@pytest.mark.parametrize("cli, message", [
    ({"topic": ("A", "B"), "sql": SELECTOR}, r"sql \(command line --sql\) goes with one topic"),
    ({"topic": ("A:X",), "sql": SELECTOR}, r"goes with one topic .* not with several"),
    ({"topic": "A", "sql": "   "}, r"an SQL92 selector cannot be empty"),
    ({"sql": SELECTOR}, r"missing topic"),
])
def test_refused(cli: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        consumer(cli)


def test_the_namespace_wraps_the_selector_s_topic_too() -> None:
    c = consumer({"topic": "Orders", "sql": SELECTOR, "namespace": "ns1"})
    wire = c.on_wire()
    assert wire.subscriptions == {"ns1%Orders": SELECTOR} and wire.expression_types == {"ns1%Orders": "SQL92"}


def test_an_expression_type_for_a_topic_not_subscribed_is_refused() -> None:
    with pytest.raises(ConfigError, match="expression_types"):
        ConsumerConfig(group="G", namesrv="n:1", subscriptions={"A": "*"}, expression_types={"B": "SQL92"}).validate()
    with pytest.raises(ConfigError, match="expression_types"):
        ConsumerConfig(group="G", namesrv="n:1", subscriptions={"A": "x"}, expression_types={"A": "XPATH"}).validate()
