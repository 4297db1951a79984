"""A PopEntry is a PoppedMessage whose constructor sets the message's fields itself (a second Python call per
popped message saved): these tests hold the two constructors, and ``PopEntry.of``, to the same fields, so a field
added to PoppedMessage and not to PopEntry fails here, not in a handler."""

from __future__ import annotations

import pytest

from rmqrun.client.pop_api import PoppedMessage
from rmqrun.consumer.pop_queue import PopEntry
from tests.fakes.engine import popped


#: what a message is read by: its own slots (the run it shares with the others of its pop aside: a constructor
#: makes one per message) and what it reads through them, its run or its instance dict
_FIELDS = tuple(name for name in PoppedMessage.__slots__ if name not in ("run", "__dict__")) + (
    "topic", "ack_topic", "receipt", "queue_id", "_pop_time", "first_pop_time", "tags", "order_count")


def _message_fields(obj: PoppedMessage) -> dict[str, object]:
    missing = [name for name in _FIELDS if not hasattr(obj, name)]
    assert not missing, f"{type(obj).__name__} leaves PoppedMessage's {missing} unset"
    return {name: getattr(obj, name) for name in _FIELDS}


@pytest.mark.parametrize("order_count", [None, 3])
def test_an_entry_made_from_a_message_keeps_every_field_of_it(order_count: int | None) -> None:
    message = popped(7, queue_id=2, reconsume_times=1, order_count=order_count, retry=True)
    message.stored = 1234
    entry = PopEntry.of(message)
    assert _message_fields(entry) == _message_fields(message)
    assert entry.message is entry and entry.offset == 7 and entry.receipt == message.receipt


def test_the_entry_constructor_takes_the_message_constructors_arguments_in_the_same_order() -> None:
    message = popped(5)
    args = (message.record, "T", "%RETRY%G", message.receipt, 2, 99, "TagA", 4, b"k\x01v\x02", 11, 22)
    assert _message_fields(PopEntry(*args)) == _message_fields(PoppedMessage(*args))
