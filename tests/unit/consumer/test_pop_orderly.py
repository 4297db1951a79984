"""The reconsume count an orderly POP message starts with (``pop_orderly.pop_reconsume_times``)."""

from __future__ import annotations

from rmqrun.consumer.pop_orderly import pop_reconsume_times


def test_a_message_behind_another_un_acked_one_never_failed_whatever_the_broker_counted() -> None:
    # it waited through 3 pops behind the head: in order it never ran while the head was out
    assert pop_reconsume_times(3, 0, head=False) == 0


def test_the_head_of_its_queue_takes_the_broker_s_count_of_its_redeliveries() -> None:
    # the batch came back after a stop, a kill or a lapse: a message that takes its instance down still
    # reaches the DLQ
    assert pop_reconsume_times(2, 0, head=True) == 2


def test_no_count_from_the_broker_keeps_the_stored_one() -> None:
    assert pop_reconsume_times(None, 1, head=True) == 1
    assert pop_reconsume_times(0, 1, head=True) == 1
