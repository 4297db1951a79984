"""Finding stored messages by id or key: the parts of Java's ``MQAdminImpl`` a pull consumer uses.

Two kinds of id name a message. The *offset* id (``Message.offset_msg_id``) is
the store's address and commit-log offset, so one VIEW_MESSAGE_BY_ID to that
address returns the message. The *client* id (``Message.msg_id``, the
producer's ``UNIQ_KEY``) says nothing of where the message is: it is found
through the brokers' key index, by a QUERY_MESSAGE with the unique-key flag to
every broker of the topic. Both are 16 (or 28) bytes of hex, so text alone
cannot always tell them apart; Java's ``viewMessage(topic, msgId)`` decodes
the id as an offset id and falls back to the index when that fails, and so
does :meth:`AsyncPullConsumer.view_message` (a client id's "port" is its
producer's pid and class-loader hash, outside 0..65535 unless the pid is a
multiple of 65536, where the offset lookup fails and the index answers).

This module holds the decisions: which kind an id may be, which answered
messages really match (the index is a hash index: Java re-checks each
message's keys or id), which one of several copies of a unique id to return
(the earliest stored, as Java does: a producer's retry may store one message
twice), and how the brokers' answers add up (:func:`query_brokers`). Unlike
Java, a broker that fails to answer is not silently skipped: its error is kept
in the result, and raised when no other broker found anything.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Iterator, Sequence

from rmqrun.client.broker import BrokerClient
from rmqrun.client.msgid import nearly_time_ms
from rmqrun.model import Message
from rmqrun.protocol.headers import QueryMessageRequestHeader
from rmqrun.remoting.errors import AccessDeniedError, ProtocolError, RemotingError
from rmqrun.remoting.msg_id import decode_offset_msg_id, parse_address

#: Java ``MQAdminImpl.queryMessageByUniqKey``: up to 32 copies, from a second before the id's time
UNIQUE_QUERY_MAX = 32
UNIQUE_QUERY_LEEWAY_MS = 1000
#: ``Long.MAX_VALUE``: no upper bound on the store time
END_OF_TIME_MS = 2**63 - 1
#: the separator of several keys in the KEYS property (MessageConst.KEY_SEPARATOR)
KEY_SEPARATOR = " "


@dataclass(frozen=True, slots=True)
class QueryResult:
    """What :meth:`~rmqrun.pull.AsyncPullConsumer.query_message` found (Java ``QueryResult``).

    ``messages`` oldest stored first, across brokers; ``index_last_update_timestamp``
    is the newest time any broker's index had reached (a message stored after it
    may not be found yet); ``errors`` maps the address of each broker that did not
    answer to its error (empty when all did). Iterable and sized like its messages.
    """

    index_last_update_timestamp: int
    messages: list[Message] = field(default_factory=list)
    errors: dict[str, RemotingError] = field(default_factory=dict)

    def __iter__(self) -> Iterator[Message]:
        return iter(self.messages)

    def __len__(self) -> int:
        return len(self.messages)


def offset_id_address(msg_id: str) -> tuple[str, int] | None:
    """(store address, commit-log offset) when ``msg_id`` can be an offset id, else None.

    Java's ``decodeMessageId`` fails on a port outside 0..65535 (what a client
    id decodes to nearly always); such an id can only be looked up in the index.
    """
    try:
        addr, offset = decode_offset_msg_id(msg_id)
        _, port = parse_address(addr)
    except (ProtocolError, ValueError):
        return None
    if not 0 <= port <= 65535 or offset < 0:
        return None
    return addr, offset


def unique_query_begin_ms(msg_id: str, now_ms: int | None = None) -> int:
    """Where a unique-key query's time range starts: a second before the id says it was made,
    or 0 when the id is not a client id's layout (nothing is excluded then)."""
    try:
        return max(0, nearly_time_ms(msg_id, now_ms) - UNIQUE_QUERY_LEEWAY_MS)
    except ValueError:
        return 0


def has_key(msg: Message, key: str) -> bool:
    """Whether ``key`` is one of the message's KEYS (the property holds them space-separated)."""
    keys = msg.properties.get("KEYS")
    return bool(key) and keys is not None and key in keys.split(KEY_SEPARATOR)


def matching(messages: list[Message], key: str, *, unique_key: bool) -> list[Message]:
    """The answered messages that really carry ``key`` (as KEYS, or as the client id)."""
    if unique_key:
        return [m for m in messages if m.msg_id == key]
    return [m for m in messages if has_key(m, key)]


def earliest(messages: list[Message]) -> Message | None:
    """The copy stored first (Java keeps the smallest store timestamp); None for no copy."""
    return min(messages, key=lambda m: m.store_timestamp, default=None)


async def query_brokers(client: BrokerClient, brokers: Sequence[tuple[str, str]], header: QueryMessageRequestHeader,
                        *, unique_key: bool, timeout: float) -> QueryResult:
    """Ask every (broker name, address) at once and keep the messages that really carry the key.

    An ACL refusal is raised at once (no other broker will say otherwise); other
    failures are kept in ``errors`` and raised only when nothing was found, so an
    unreachable broker never reads as "no such message".
    """
    answers = await asyncio.gather(
        *(client.query_message(addr, header, unique_key=unique_key, broker_name=name, timeout=timeout)
          for name, addr in brokers), return_exceptions=True)
    found: list[Message] = []
    errors: dict[str, RemotingError] = {}
    newest = 0
    for (_, addr), answer in zip(brokers, answers):
        if isinstance(answer, AccessDeniedError):
            raise answer
        if isinstance(answer, RemotingError):
            errors[addr] = answer
            continue
        if isinstance(answer, BaseException):
            raise answer
        messages, index_time = answer
        newest = max(newest, index_time)
        found.extend(matching(messages, header.key, unique_key=unique_key))
    if not found and errors:
        raise next(iter(errors.values()))
    found.sort(key=lambda m: m.store_timestamp)
    return QueryResult(newest, found, errors)
