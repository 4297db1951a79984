"""The engine a consume mode names, started from the settings: the one place that picks
:class:`~rmqrun.consumer.push.PushConsumer`, :class:`~rmqrun.consumer.pop_push.PopPushConsumer` or
:class:`~rmqrun.consumer.mode_follow.AutoPushConsumer`."""

from __future__ import annotations

from typing import Any

from rmqrun.consumer.config import ConsumerConfig
from rmqrun.consumer.consume_mode import ENGINE_AUTO, ENGINE_POP, ENGINE_PUSH
from rmqrun.consumer.executor import Executor
from rmqrun.consumer.mode_follow import AutoPushConsumer
from rmqrun.consumer.pop_push import PopPushConsumer
from rmqrun.consumer.push import PushConsumer

ENGINES: dict[str, type[PushConsumer]] = {ENGINE_PUSH: PushConsumer, ENGINE_POP: PopPushConsumer,
                                          ENGINE_AUTO: AutoPushConsumer}


def new_engine(config: ConsumerConfig, executor: Executor, **kw: Any) -> PushConsumer:
    """The engine of ``config.mode`` (not started)."""
    return ENGINES[config.mode.engine](config, executor, **kw)
