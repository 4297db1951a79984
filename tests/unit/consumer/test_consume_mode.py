"""The consume mode object: one value per mode, named from the three settings, with its engine, services,
description and cross-checks (rmqrun/consumer/consume_mode.py)."""

from __future__ import annotations

import pytest

from rmqrun.consumer import consume_mode as cm
from rmqrun.consumer import consume_services, engines
from rmqrun.consumer.config import ConsumerConfig
from rmqrun.consumer.pop_push import PopPushConsumer
from rmqrun.consumer.push import PushConsumer
from rmqrun.errors import ConfigError


def config(**kw: object) -> ConsumerConfig:
    return ConsumerConfig("G", "127.0.0.1:9876", {"T": "*"}, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("kw, mode, engine, description", [
    ({}, cm.CONCURRENT, PushConsumer, "concurrently"),
    ({"orderly": True}, cm.ORDERLY, PushConsumer, "orderly"),
    ({"order_by": "key", "order_key": "tags"}, cm.orderly_by_key("tags"), PushConsumer, "orderly by key (tags)"),
    ({"consume_mode": "pop"}, cm.POP, PopPushConsumer, "concurrently by POP"),
    ({"consume_mode": "pop", "orderly": True}, cm.POP_ORDERLY, PopPushConsumer, "orderly by POP"),
])
def test_each_setting_combination_names_one_mode(kw: dict[str, object], mode: cm.ConsumeMode, engine: type,
                                                 description: str) -> None:
    cfg = config(**kw).validate()
    assert cfg.mode == mode
    assert engines.ENGINES[cfg.mode.engine] is engine
    assert cfg.mode.description == description == str(cfg.mode)
    assert cfg.mode.orderly == cfg.orderly
    assert cfg.mode.pop == (cfg.consume_mode == "pop")


def test_every_named_service_exists_and_only_pop_modes_pop() -> None:
    for mode in (cm.CONCURRENT, cm.ORDERLY, cm.orderly_by_key("keys"), cm.POP, cm.POP_ORDERLY):
        assert mode.service in consume_services._PULL
        assert (mode.pop_service is not None) == mode.pop
        if mode.pop_service is not None:
            assert mode.pop_service in consume_services._POP
    with pytest.raises(ValueError, match="pops nothing"):
        consume_services.pop_service(cm.ORDERLY, None)  # type: ignore[arg-type]


@pytest.mark.parametrize("kw, message", [
    ({"consume_mode": "pop", "order_by": "key"}, "consume_mode='pop' is invalid: order_by=key is not available "
                                                 "with POP"),
    ({"order_by": "key", "auto_commit": False}, "auto_commit=False is invalid: order_by=key commits per key"),
    ({"consume_mode": "pop", "orderly": True, "auto_commit": False}, "orderly POP acks each message"),
    ({"consume_mode": "pop", "message_model": "BROADCASTING"}, "POP is a clustering model"),
    ({"consume_mode": "pop", "orderly": True, "message_model": "BROADCASTING"}, "POP is a clustering model"),
])
def test_the_mode_refuses_what_it_cannot_honour_with_the_way_out(kw: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        config(**kw).validate()


def test_the_mode_is_a_frozen_value() -> None:
    with pytest.raises(AttributeError):
        cm.POP.engine = cm.ENGINE_PUSH  # type: ignore[misc]
    assert config(orderly=True).mode == cm.ORDERLY and hash(cm.ORDERLY) == hash(config(orderly=True).mode)


def test_key_order_on_pop_is_named_for_what_it_asks_and_refused() -> None:
    mode = config(consume_mode="pop", order_by="key").mode
    assert mode.pop and mode.by_key and mode.orderly
    assert mode.description == "orderly by key (sharding_key) by POP"
    with pytest.raises(ConfigError, match="not available with POP"):
        mode.validate(config(consume_mode="pop", order_by="key"))
