"""The name server's key/value table (``KVConfigManager``): namespaced strings, kept on disk.

Admin tools store cluster-wide facts here that no single broker owns; the one that
matters for consumers is ``ORDER_TOPIC_CONFIG``: ``mqadmin updateTopic -o true`` (and
``rmqrun topic create --order``) writes ``topic -> "broker-a:8;broker-b:8"``, the brokers
and write-queue counts an ordered topic's producers must hash over, so that a queue count
seen by a producer does not change when a broker is down. A name server with
``order_message_enable`` serves that value in the topic's route as ``orderTopicConf``.

The table is saved after every change, as Java does, in Java's layout
(``{"configTable": {namespace: {key: value}}}``), here ``<data-dir>/namesrv/kvConfig.json``,
through the store's crash-safe JSON file (atomic replace, a backup, loud on corruption).
"""

from __future__ import annotations

from pathlib import Path

from loguru import logger

from rmqrun.broker.store.json_file import JsonFile

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


class KVConfigTable:
    """Namespaces of string keys and values; every change is saved before it is acknowledged."""

    def __init__(self, path: Path | None) -> None:
        #: None: in memory only (a name server without a data directory).
        self._file = JsonFile(path) if path is not None else None
        self._table: dict[str, dict[str, str]] = {}
        #: What was wrong with the file at load, if anything (the file is then moved aside).
        self.problem: str | None = None

    @property
    def path(self) -> Path | None:
        return self._file.path if self._file is not None else None

    def load(self) -> None:
        if self._file is None:
            return
        loaded = self._file.load(_parse)
        self._table = loaded.data or {}
        self.problem = loaded.problem

    def get(self, namespace: str, key: str) -> str | None:
        return self._table.get(namespace, {}).get(key)

    def namespace(self, namespace: str) -> dict[str, str] | None:
        kv = self._table.get(namespace)
        return dict(kv) if kv is not None else None

    def put(self, namespace: str, key: str, value: str) -> None:
        prev = self._table.setdefault(namespace, {}).get(key)
        self._table[namespace][key] = value
        logger.info("name server KV {} {}/{} = {!r}", "updated" if prev is not None else "created", namespace, key,
                    value)
        self._save()

    def delete(self, namespace: str, key: str) -> bool:
        kv = self._table.get(namespace)
        if kv is None or key not in kv:
            return False
        value = kv.pop(key)
        logger.info("name server KV deleted {}/{} (was {!r})", namespace, key, value)
        self._save()
        return True

    def _save(self) -> None:
        if self._file is not None:
            self._file.save({"configTable": self._table})
