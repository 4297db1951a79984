"""The consume service each :class:`~rmqrun.consumer.consume_mode.ConsumeMode` names, built for an engine.

The mode holds names (it stands below the services); this is the one place
that turns them into objects, so an engine never decides from the settings
which service it runs.
"""

from __future__ import annotations

from typing import Callable, Union

from rmqrun.consumer.consume_concurrently import ConcurrentConsumeService
from rmqrun.consumer.consume_keyed import KeyedConsumeService
from rmqrun.consumer.consume_mode import (SERVICE_CONCURRENT, SERVICE_KEYED, SERVICE_ORDERLY, SERVICE_POP,
                                         SERVICE_POP_ORDERLY, ConsumeMode)
from rmqrun.consumer.consume_orderly import OrderlyConsumeService
from rmqrun.consumer.context import ConsumeContext
from rmqrun.consumer.pop_consume import PopConsumeService, PopContext
from rmqrun.consumer.pop_orderly import PopOrderlyConsumeService

PullService = Union[ConcurrentConsumeService, OrderlyConsumeService, KeyedConsumeService]

_PULL: dict[str, Callable[[ConsumeContext], PullService]] = {
    SERVICE_CONCURRENT: ConcurrentConsumeService,
    SERVICE_ORDERLY: OrderlyConsumeService,
    SERVICE_KEYED: KeyedConsumeService,
}
_POP: dict[str, Callable[[PopContext], PopConsumeService]] = {
    SERVICE_POP: PopConsumeService,
    SERVICE_POP_ORDERLY: PopOrderlyConsumeService,
}


def pull_service(mode: ConsumeMode, engine: ConsumeContext) -> PullService:
    """The service for the queues ``engine`` pulls (in a POP mode: the push retry topic)."""
    return _PULL[mode.service](engine)


def pop_service(mode: ConsumeMode, engine: PopContext) -> PopConsumeService:
    """The service for popped messages; only a POP mode has one."""
    if mode.pop_service is None:
        raise ValueError(f"mode {mode.kind} pops nothing")
    return _POP[mode.pop_service](engine)
