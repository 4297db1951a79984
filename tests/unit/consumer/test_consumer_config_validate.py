"""``ConsumerConfig.validate``: the push consumer's last line against bad values.

The CLI checks its settings first, but programs build a ``ConsumerConfig``
directly; each bad value must be refused with the option's name and the value in
the message (Java's ``checkConfig`` ranges), and a valid config returned as is.
"""

from __future__ import annotations

import pytest

from rmqrun.consumer.config import ConsumerConfig
from rmqrun.errors import ConfigError


def _config(**kw: object) -> ConsumerConfig:
    base: dict[str, object] = {"group": "G", "namesrv": "127.0.0.1:9876", "subscriptions": {"T": "*"}}
    base.update(kw)
    return ConsumerConfig(**base)  # type: ignore[arg-type]


def test_a_valid_config_is_returned_unchanged() -> None:
    cfg = _config(pull_threshold_for_topic=1000, pull_threshold_size_for_topic=100, max_reconsume_times=-1)
    assert cfg.validate() is cfg


@pytest.mark.parametrize(("name", "value", "hint"), [
    ("group", "", "group name is required"),
    ("group", "DEFAULT_CONSUMER", "reserved"),
    ("namesrv", "", "name server address"),
    ("subscriptions", {}, "at least one topic"),
    ("message_model", "FANOUT", "CLUSTERING, BROADCASTING"),
    ("consume_from_where", "CONSUME_FROM_NOW", "CONSUME_FROM_LAST_OFFSET"),
    ("consume_timestamp", "2024-01-01", "yyyyMMddHHmmss"),
    ("consume_concurrently_max_span", 0, "1 to 65535"),
    ("pull_threshold_for_queue", 65536, "1 to 65535"),
    ("pull_threshold_size_for_queue", 2048, "from 1 to 1024"),
    ("pull_threshold_for_topic", 0, "-1 or 1 to 6553500"),
    ("pull_threshold_size_for_topic", 102401, "-1 or 1 to 102400"),
    ("pull_interval_ms", -1, "0 to 65535"),
    ("consume_message_batch_max_size", True, "an integer"),
    ("pull_batch_size", 1025, "from 1 to 1024"),
    ("max_reconsume_times", -2, "-1 to 2147483647"),
    ("max_reconsume_times", 2**31, "-1 to 2147483647"),
    ("suspend_current_queue_time_ms", 0, "1 to 2147483647"),
    ("order_by", "partition", "queue or key"),
    ("consume_mode", "push", "pull, pop or auto"),
    ("heartbeat_interval_ms", 99, "at least 100"),
    ("consume_timeout_minutes", 0, "positive number of minutes"),
    ("consume_timeout_minutes", "15", "positive number of minutes"),
])
def test_each_bad_value_is_refused_by_name(name: str, value: object, hint: str) -> None:
    with pytest.raises(ConfigError) as err:
        _config(**{name: value}).validate()
    message = str(err.value)
    assert message.startswith(f"{name}={value!r} is invalid"), message
    assert hint in message


@pytest.mark.parametrize("subs", [{"": "*"}, {"T": None}])
def test_a_subscription_needs_a_topic_and_a_tag_expression(subs: dict[str, object]) -> None:
    with pytest.raises(ConfigError, match=r"^subscriptions=.* is invalid: topic -> tag expression"):
        _config(subscriptions=subs).validate()


@pytest.mark.parametrize(("kw", "hint"), [
    ({"consume_mode": "push"}, "pull, pop or auto"),
    ({"pop_invisible_time_ms": 4999}, "5000 to 300000 ms"),
    ({"pop_invisible_time_ms": 300001}, "5000 to 300000 ms"),
    ({"pop_batch_size": 33}, "from 1 to 32"),
    ({"pop_threshold_for_queue": 0}, "1 to 65535"),
    ({"consume_mode": "pop", "orderly": True, "auto_commit": False}, "needs auto_commit=true"),
    ({"consume_mode": "pop", "order_by": "key"}, "order_by=key is not available with POP"),
    ({"consume_mode": "pop", "message_model": "BROADCASTING"}, "clustering model"),
])
def test_pop_settings_are_checked_and_unsupported_combinations_refused(kw: dict[str, object], hint: str) -> None:
    with pytest.raises(ConfigError, match=hint):
        _config(**kw).validate()


def test_a_pop_config_is_valid() -> None:
    cfg = _config(consume_mode="pop", pop_invisible_time_ms=5000, pop_batch_size=1)
    assert cfg.validate() is cfg
    assert _config(consume_mode="pop", orderly=True).validate().orderly
