"""Persisted topic configs (RocketMQ's ``topics.json``, TopicConfigManager)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .config_table import ConfigTable

PERM_PRIORITY = 8
PERM_READ = 4
PERM_WRITE = 2
PERM_INHERIT = 1


@dataclass(frozen=True)
class TopicConfig:
    """One topic; defaults are RocketMQ's ``TopicConfig`` (16/16 queues, read+write)."""

    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = PERM_READ | PERM_WRITE
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False

    def to_json(self) -> dict[str, Any]:
        """RocketMQ's field names, so the file reads like a broker's topics.json."""
        return {
            "topicName": self.topic_name,
            "readQueueNums": self.read_queue_nums,
            "writeQueueNums": self.write_queue_nums,
            "perm": self.perm,
            "topicFilterType": self.topic_filter_type,
            "topicSysFlag": self.topic_sys_flag,
            "order": self.order,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "TopicConfig":
        return cls(
            topic_name=str(data["topicName"]),
            read_queue_nums=int(data.get("readQueueNums", 16)),
            write_queue_nums=int(data.get("writeQueueNums", 16)),
            perm=int(data.get("perm", PERM_READ | PERM_WRITE)),
            topic_filter_type=str(data.get("topicFilterType", "SINGLE_TAG")),
            topic_sys_flag=int(data.get("topicSysFlag", 0)),
            order=bool(data.get("order", False)),
        )


class TopicConfigStore(ConfigTable[TopicConfig]):
    FILE_NAME = "topics.json"

    def __init__(self, path: Path) -> None:
        super().__init__(path, "topicConfigTable", TopicConfig.to_json, TopicConfig.from_json, lambda t: t.topic_name)
