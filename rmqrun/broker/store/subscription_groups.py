"""Persisted subscription groups (RocketMQ's ``subscriptionGroup.json``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .config_table import ConfigTable


@dataclass(frozen=True)
class SubscriptionGroupConfig:
    """One consumer group; defaults are RocketMQ's ``SubscriptionGroupConfig``."""

    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True

    def to_json(self) -> dict[str, Any]:
        return {
            "groupName": self.group_name,
            "consumeEnable": self.consume_enable,
            "consumeFromMinEnable": self.consume_from_min_enable,
            "consumeBroadcastEnable": self.consume_broadcast_enable,
            "retryQueueNums": self.retry_queue_nums,
            "retryMaxTimes": self.retry_max_times,
            "brokerId": self.broker_id,
            "whichBrokerWhenConsumeSlowly": self.which_broker_when_consume_slowly,
            "notifyConsumerIdsChangedEnable": self.notify_consumer_ids_changed_enable,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "SubscriptionGroupConfig":
        return cls(
            group_name=str(data["groupName"]),
            consume_enable=bool(data.get("consumeEnable", True)),
            consume_from_min_enable=bool(data.get("consumeFromMinEnable", True)),
            consume_broadcast_enable=bool(data.get("consumeBroadcastEnable", True)),
            retry_queue_nums=int(data.get("retryQueueNums", 1)),
            retry_max_times=int(data.get("retryMaxTimes", 16)),
            broker_id=int(data.get("brokerId", 0)),
            which_broker_when_consume_slowly=int(data.get("whichBrokerWhenConsumeSlowly", 1)),
            notify_consumer_ids_changed_enable=bool(data.get("notifyConsumerIdsChangedEnable", True)),
        )


class SubscriptionGroupStore(ConfigTable[SubscriptionGroupConfig]):
    FILE_NAME = "subscriptionGroup.json"

    def __init__(self, path: Path) -> None:
        super().__init__(
            path,
            "subscriptionGroupTable",
            SubscriptionGroupConfig.to_json,
            SubscriptionGroupConfig.from_json,
            lambda g: g.group_name,
        )

    def get_or_create(self, group_name: str) -> SubscriptionGroupConfig:
        """The group's config, creating a default one (RocketMQ autoCreateSubscriptionGroup)."""
        found = self.get(group_name)
        if found is None:
            found = SubscriptionGroupConfig(group_name)
            self.put(found)
        return found
