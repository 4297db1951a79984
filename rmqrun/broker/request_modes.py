"""The broker's message-request-mode table (``MessageRequestModeManager``): topic -> group -> PULL or POP.

``rmqrun group mode`` / ``mqadmin setConsumeMode`` store a group's mode for a
topic here; QUERY_ASSIGNMENT reads it to decide whether a client gets queues of
its own (PULL) or shares them (POP). A pair nobody set is PULL, the 5.x
broker's ``defaultMessageRequestMode``; ``%RETRY%`` topics are always PULL.

The table is saved after every change, before the change is acknowledged, in
Java's layout (``{"messageRequestModeMap": {topic: {group: body}}}``) as
``<data-dir>/config/messageRequestMode.json`` beside the topic and group
tables, through the store's crash-safe JSON file (atomic replace, a backup,
a corrupt file moved aside and reported rather than overwritten).
"""

from __future__ import annotations

from pathlib import Path

from loguru import logger

from rmqrun.broker.store.json_file import JsonFile
from rmqrun.protocol.assignment import (
    MessageRequestMode,
    MessageRequestModeTable,
    SetMessageRequestModeRequestBody,
)
from rmqrun.remoting.errors import ProtocolError
from rmqrun.topic_names import is_retry_topic

FILE_NAME = "messageRequestMode.json"
#: BrokerConfig.defaultMessageRequestMode / defaultPopShareQueueNum of RocketMQ 5.x.
DEFAULT_MODE = MessageRequestMode.PULL
DEFAULT_POP_SHARE_QUEUE_NUM = -1


def _parse(data: object) -> MessageRequestModeTable:
    try:
        return MessageRequestModeTable.from_json(data)
    except ProtocolError as exc:  # the JSON file counts it as corrupt only for the standard errors
        raise ValueError(str(exc)) from exc


class RequestModeTable:
    """Modes by (topic, group); every change is saved before it returns."""

    def __init__(self, path: Path | None) -> None:
        #: None: in memory only (tests, a broker without a data directory).
        self._file = JsonFile(path) if path is not None else None
        self._table = MessageRequestModeTable()
        #: What was wrong with the file at load, if anything (the file is then moved aside).
        self.problem: str | None = None

    @classmethod
    def in_data_dir(cls, data_dir: Path) -> "RequestModeTable":
        return cls(Path(data_dir) / "config" / FILE_NAME)

    @property
    def path(self) -> Path | None:
        return self._file.path if self._file is not None else None

    def load(self) -> None:
        if self._file is None:
            return
        loaded = self._file.load(_parse)
        self._table = loaded.data if loaded.data is not None else MessageRequestModeTable()
        self.problem = loaded.problem

    def get(self, topic: str, group: str) -> SetMessageRequestModeRequestBody | None:
        """What was set for the pair, or None."""
        return self._table.modes.get(topic, {}).get(group)

    def effective(self, topic: str, group: str) -> SetMessageRequestModeRequestBody:
        """The mode QUERY_ASSIGNMENT applies: what was set, else the broker default (PULL for retry topics)."""
        stored = self.get(topic, group)
        if stored is not None:
            return stored
        mode = MessageRequestMode.PULL if is_retry_topic(topic) else DEFAULT_MODE
        share = DEFAULT_POP_SHARE_QUEUE_NUM if mode is MessageRequestMode.POP else 0
        return SetMessageRequestModeRequestBody(topic, group, mode, share)

    def put(self, body: SetMessageRequestModeRequestBody) -> None:
        """Store one pair's mode and save. Raises OSError when the file cannot be written (the
        change is then undone, so what a client was told matches what a restart will find)."""
        groups = self._table.modes.setdefault(body.topic, {})
        previous = groups.get(body.consumer_group)
        groups[body.consumer_group] = body
        try:
            self._save()
        except OSError:
            if previous is None:
                del groups[body.consumer_group]
                if not groups:
                    del self._table.modes[body.topic]
            else:
                groups[body.consumer_group] = previous
            raise
        logger.info("message request mode of group {} on topic {}: {} (popShareQueueNum {})",
                    body.consumer_group, body.topic, body.mode.value, body.pop_share_queue_num)

    def snapshot(self) -> MessageRequestModeTable:
        """A copy of the whole table (the GET_ALL_MESSAGE_REQUEST_MODE answer)."""
        return MessageRequestModeTable({t: dict(groups) for t, groups in self._table.modes.items()})

    def _save(self) -> None:
        if self._file is not None:
            self._file.save(self._table.to_json())
