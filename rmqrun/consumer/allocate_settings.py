"""The allocation strategy a rebalancer runs, built from the consumer's settings.

Three of the Java strategies need more than a name: CONFIG a fixed queue list
(``setMessageQueueList``), MACHINE_ROOM its rooms (``setConsumeridcs``) and
MACHINE_ROOM_NEARBY a wrapped strategy and the room resolvers. Without them the
first two own nothing at all, so validation refuses them empty rather than
letting a group sit idle.
"""

from __future__ import annotations

from typing import Protocol

from rmqrun.consumer.allocate import AllocateStrategy, get_strategy, strategy_key
from rmqrun.consumer.allocate_nearby import is_nearby, nearby_strategy
from rmqrun.errors import ConfigError
from rmqrun.model import MessageQueue


class AllocationSettings(Protocol):
    allocate_strategy: str
    allocate_queues: str | None
    allocate_idcs: str | None
    machine_room: str | None
    nearby_allocate_strategy: str
    broker_machine_rooms: str
    consumer_machine_rooms: str


def parse_queues(value: str | None) -> list[MessageQueue]:
    """``TOPIC@BROKER:QUEUE_ID,...`` -> the CONFIG strategy's queue list."""
    queues = []
    for item in (value or "").split(","):
        item = item.strip()
        topic, at, rest = item.partition("@")
        broker, colon, qid = rest.rpartition(":")
        if not (at and colon and topic and broker and qid.isdigit()):
            raise ConfigError(f"allocate_queues: {item!r} is not TOPIC@BROKER:QUEUE_ID "
                              "(e.g. Orders@broker-a:0,Orders@broker-a:1)")
        queues.append(MessageQueue(topic, broker, int(qid)))
    return queues


def parse_idcs(value: str | None) -> list[str]:
    return [idc.strip() for idc in (value or "").split(",") if idc.strip()]


def configured_strategy(config: AllocationSettings) -> AllocateStrategy:
    """Build the configured strategy with its options; ConfigError when a needed option is missing."""
    name = strategy_key(config.allocate_strategy)
    if is_nearby(name):
        return nearby_strategy(machine_room=config.machine_room, wrapped=config.nearby_allocate_strategy,
                               broker_rooms=config.broker_machine_rooms,
                               consumer_rooms=config.consumer_machine_rooms)
    if name == "CONFIG":
        if not config.allocate_queues:
            raise ConfigError("allocate_strategy=CONFIG needs allocate_queues: the queues this instance consumes, "
                              "TOPIC@BROKER:QUEUE_ID,... (without them it would consume nothing)")
        return get_strategy(name, queues=parse_queues(config.allocate_queues))
    if name == "MACHINE_ROOM":
        idcs = parse_idcs(config.allocate_idcs)
        if not idcs:
            raise ConfigError("allocate_strategy=MACHINE_ROOM needs allocate_idcs: the machine rooms whose "
                              "brokers (named IDC@NAME) this group consumes, e.g. idc1,idc2 (without them it "
                              "would consume nothing)")
        return get_strategy(name, idcs=idcs)
    try:
        return get_strategy(name)
    except ValueError as exc:
        raise ConfigError(f"allocate_strategy={config.allocate_strategy!r} is invalid: {exc}") from None
