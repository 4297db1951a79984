"""The name server's key/value table (``KVConfigManager``): namespaced strings, kept on disk.

Admin tools store cluster-wide facts here that no single broker owns; the one that
matters for consumers is ``ORDER_TOPIC_CONFIG``: ``mqadmin updateTopic -o true`` (and
``rmqrun topic create --order``) writes ``topic -> "broker-a:8;broker-b:8"``, the brokers
and write-queue counts an ordered topic's producers must hash over, so that a queue count
seen by a producer does not change when a broker is down. A name server with
``order_message_enable`` serves that value in the topic's route as ``orderTopicConf``.

The table is saved after every change, as Java does, in Java's layout
(``{"configTable": {namespace: {key: value}}}``), here ``<data-dir>/namesrv/kvConfig.json``,
through :class:`~rmqrun.broker.store.saved_table.SavedTable` (the rules it shares with the
broker's request-mode table: saved before acknowledged, undone when the save fails, loud on corruption).
"""

from __future__ import annotations

from pathlib import Path

from loguru import logger

from rmqrun.broker.store.saved_table import SavedTable

#: NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG
ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"
FILE_NAME = "kvConfig.json"


def _parse(data: object) -> dict[str, dict[str, str]]:
    if not isinstance(data, dict):
        raise TypeError("not a JSON object")
    table = data.get("configTable") or {}
    if not isinstance(table, dict):
        raise TypeError("configTable is not an object")
    return {str(ns): {str(k): str(v) for k, v in kv.items()} for ns, kv in table.items()}


class KVConfigTable(SavedTable[str]):
    """Namespaces of string keys and values; every change is saved before it is acknowledged."""

    def __init__(self, path: Path | None) -> None:
        super().__init__(path, _parse, lambda rows: {"configTable": rows})

    def namespace(self, namespace: str) -> dict[str, str] | None:
        return self.row(namespace)

    def put(self, namespace: str, key: str, value: str) -> str | None:
        prev = super().put(namespace, key, value)
        logger.info("name server KV {} {}/{} = {!r}", "updated" if prev is not None else "created", namespace, key,
                    value)
        return prev

    def delete(self, namespace: str, key: str) -> bool:
        value = self.get(namespace, key)
        if not super().delete(namespace, key):
            return False
        logger.info("name server KV deleted {}/{} (was {!r})", namespace, key, value)
        return True
