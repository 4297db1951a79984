"""The broker's message-request-mode table (``MessageRequestModeManager``): topic -> group -> PULL or POP.

``rmqrun group mode`` / ``mqadmin setConsumeMode`` store a group's mode for a
topic here; QUERY_ASSIGNMENT reads it to decide whether a client gets queues of
its own (PULL) or shares them (POP). A pair nobody set is PULL, the 5.x
broker's ``defaultMessageRequestMode``; ``%RETRY%`` topics are always PULL.

The table is saved after every change, before the change is acknowledged, in
Java's layout (``{"messageRequestModeMap": {topic: {group: body}}}``) as
``<data-dir>/config/messageRequestMode.json`` beside the topic and group
tables, through the store's crash-safe JSON file (atomic replace, a backup,
a corrupt file moved aside and reported rather than overwritten), by
:class:`~rmqrun.broker.store.saved_table.SavedTable` as the name server's KV table is.
"""

from __future__ import annotations

from pathlib import Path

from loguru import logger

from rmqrun.broker.store.saved_table import SavedTable
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


def _parse(data: object) -> dict[str, dict[str, SetMessageRequestModeRequestBody]]:
    try:
        return MessageRequestModeTable.from_json(data).modes
    except ProtocolError as exc:  # the JSON file counts it as corrupt only for the standard errors
        raise ValueError(str(exc)) from exc


def _dump(rows: dict[str, dict[str, SetMessageRequestModeRequestBody]]) -> object:
    return MessageRequestModeTable(rows).to_json()


class RequestModeTable:
    """Modes by (topic, group); every change is saved before it returns."""

    def __init__(self, path: Path | None) -> None:
        #: None: in memory only (tests, a broker without a data directory).
        self._saved: SavedTable[SetMessageRequestModeRequestBody] = SavedTable(path, _parse, _dump)

    @classmethod
    def in_data_dir(cls, data_dir: Path) -> "RequestModeTable":
        return cls(Path(data_dir) / "config" / FILE_NAME)

    @property
    def path(self) -> Path | None:
        return self._saved.path

    @property
    def problem(self) -> str | None:
        """What was wrong with the file at load, if anything (the file is then moved aside)."""
        return self._saved.problem

    def load(self) -> None:
        self._saved.load()

    def get(self, topic: str, group: str) -> SetMessageRequestModeRequestBody | None:
        """What was set for the pair, or None."""
        return self._saved.get(topic, group)

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
        self._saved.put(body.topic, body.consumer_group, body)
        logger.info("message request mode of group {} on topic {}: {} (popShareQueueNum {})",
                    body.consumer_group, body.topic, body.mode.value, body.pop_share_queue_num)

    def snapshot(self) -> MessageRequestModeTable:
        """A copy of the whole table (the GET_ALL_MESSAGE_REQUEST_MODE answer)."""
        return MessageRequestModeTable(self._saved.rows())
