"""Mutants of the broker's POP hot path (issue #32's cuts of its CPU per popped message): the reads that replaced
generic ones (a batch ack entry, a bitset, the pop header, the pop's tag filter), the statistics' open buckets, and
the store's span reads (shared with pull).
Kept apart from :mod:`mutants_broker` only because that table is at the 600-line limit.
"""

from __future__ import annotations

from mutant_kit import I, U, Mutant, m

MUTANTS: list[Mutant] = [
    # ---------------------------------------------------------------- popb: the broker's CPU per popped message (#32)
    m("popb-ack-entry-wrong-start", "rmqrun/protocol/pop.py",
      "the broker's read of a usual batch ack entry takes the queue id for its start offset: the ack names no "
      "checkpoint, the acked messages are revived (handled twice)",
      "int(obj[\"so\"]), int(obj[\"q\"]),", "int(obj[\"q\"]), int(obj[\"q\"]),",
      U + "protocol/test_protocol_pop.py::test_the_broker_reads_each_batch_ack_entry_with_its_bitset_as_one_int",
      I + "test_broker_pop.py::test_batch_ack_acks_exactly_the_bits_sent"),
    m("popb-bitset-cache-stale", "rmqrun/protocol/pop.py",
      "a cached batch ack bitset is served for any other bitset: acks tick off the wrong messages",
      "        word = _WORDS.get(value)\n", "        word = next(iter(_WORDS.values()), None)\n",
      U + "protocol/test_protocol_pop.py::test_the_broker_reads_each_batch_ack_entry_with_its_bitset_as_one_int"),
    m("popb-fast-pop-header-order", "rmqrun/broker/processors/pop.py",
      "the pop header's fast read takes any order field as order mode: a plain pop becomes an orderly one",
      "order=order == \"true\",", "order=order is not None,",
      U + "broker/test_pop_request_header.py"),
    m("popb-pop-filter-cached-per-topic", "rmqrun/broker/processors/pop.py",
      "a pop's built tag filter is kept per topic only: a second expression on the topic gets the first one's "
      "messages",
      "        key = (topic, exp, exp_type)\n", "        key = (topic, None, None)\n",
      I + "test_broker_pop.py::test_tag_filter_skips_other_tags"),
    m("popb-stats-open-bucket-forever", "rmqrun/broker/stats.py",
      "a statistic's adds keep going to the buckets of its first 10 s: the minute, hour and day figures stop moving",
      "        if self._since <= now < self._until:", "        if self._since <= now:",
      U + "broker/test_broker_stats_table.py"),
    m("popb-stats-open-bucket-kept-after-read", "rmqrun/broker/stats.py",
      "after a read trimmed a statistic's windows, an add can go to a bucket they dropped: the count is lost",
      "        self._until = 0.0  # the windows trim", "        pass  # the windows trim",
      U + "broker/test_broker_stats_table.py"),
    m("popb-span-crosses-segment", "rmqrun/broker/store/queue_reader.py",
      "a pull's span read runs past its commit log segment: the read stops at the segment's end and the records "
      "of the next segment are skipped (the pull moves past them: lost for the group)",
      "        limit = min(start - start % segment_size + segment_size, start + SPAN_MAX)",
      "        limit = start + SPAN_MAX",
      U + "broker/test_store_get.py::test_a_span_stops_at_its_segment"),
    m("popb-span-run-at-span-start", "rmqrun/broker/store/queue_reader.py",
      "each run of a span is checked where the span starts: the records after a gap fail their seal and are "
      "never served",
      "records, picked[first][0] - start):", "records, 0):",
      U + "broker/test_store_get.py::test_records_close_together_are_read_with_one_read",
      U + "broker/test_store_get.py::test_interleaved_queues_read_correct_records"),
]
