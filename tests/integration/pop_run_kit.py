"""Helpers for the ``rmqrun run --consume-mode pop`` tests: a group switched to POP, instances started.

Each instance is a real ``rmqrun run`` process (:class:`tests.integration.signals_kit.RmqrunProcess`)
running the probe handler, which records every delivery with its process id, so
a test reads back who handled what and how often.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from rmqrun.broker.app import EmbeddedBroker
from rmqrun.client.assignment import AssignmentClient
from rmqrun.client.instance import ClientInstance
from rmqrun.protocol.assignment import MessageRequestMode
from tests.integration.signals_kit import Delivery, RmqrunProcess, Runs, read_deliveries

HANDLER = "tests.integration.handlers.probe_handler:record"


def set_pop_mode(eb: EmbeddedBroker, group: str, topic: str) -> None:
    """What ``rmqrun group mode --mode pop`` sends: every client of the group pops every queue."""
    async def main() -> None:
        inst = ClientInstance(eb.namesrv_address, instance_name="pop-mode")
        try:
            await AssignmentClient(inst.pool).set_message_request_mode(
                eb.broker_address, topic, group, MessageRequestMode.POP, pop_share_queue_num=0)
        finally:
            await inst.close()
    asyncio.run(main())


def start_pop(runs: Runs, name: str, eb: EmbeddedBroker, group: str, topic: str, record: Path, *,
              args: tuple[str, ...] = (), env: dict[str, str] | None = None,
              settings: dict[str, str] | None = None, ready: bool = True) -> RmqrunProcess:
    probe = {"PROBE_RECORD": str(record)}
    probe.update(env or {})
    proc = runs.start(name, HANDLER, namesrv=eb.namesrv_address, group=group, topic=topic,
                      args=["--consume-mode", "pop", "--workers", "1", *args], env=probe,
                      settings=settings or {}, ready_timeout=60.0 if ready else 0.0)
    return proc


def deliveries_by_idx(record: Path, event: str = "ok") -> dict[int, list[Delivery]]:
    out: dict[int, list[Delivery]] = {}
    for d in read_deliveries(record):
        if d.event == event:
            out.setdefault(d.idx, []).append(d)
    return out
