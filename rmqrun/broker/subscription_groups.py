"""Per consumer-group settings the broker keeps (``SubscriptionGroupManager``).

A group's config decides how many retry queues it gets and how often a message
is retried before the DLQ when the client does not say. RocketMQ creates the
config on first sight of the group when ``autoCreateSubscriptionGroup`` is on
(its default, and ours), so :meth:`SubscriptionGroupTable.find` creates, like
``findSubscriptionGroupConfig``. The configs live in the store's
``subscriptionGroup.json``.
"""

from __future__ import annotations

from rmqrun.broker.config import BrokerConfig
from rmqrun.broker.store.subscription_groups import SubscriptionGroupConfig, SubscriptionGroupStore

__all__ = ["SubscriptionGroupConfig", "SubscriptionGroupTable"]


class SubscriptionGroupTable:
    def __init__(self, config: BrokerConfig, store: SubscriptionGroupStore) -> None:
        self._config = config
        self._store = store

    def find(self, group: str) -> SubscriptionGroupConfig | None:
        """The group's config, created with defaults if auto-create is on (else None)."""
        sgc = self._store.get(group)
        if sgc is None and self._config.auto_create_subscription_group and group:
            sgc = SubscriptionGroupConfig(group, retry_max_times=self._config.retry_max_times)
            self._store.put(sgc)
        return sgc

    def get(self, group: str) -> SubscriptionGroupConfig | None:
        """The config without creating one."""
        return self._store.get(group)

    def put(self, sgc: SubscriptionGroupConfig) -> None:
        self._store.put(sgc)
        self._store.flush()

    def delete(self, group: str) -> bool:
        deleted = self._store.delete(group)
        if deleted:
            self._store.flush()
        return deleted

    def names(self) -> list[str]:
        return list(self._store.all())
