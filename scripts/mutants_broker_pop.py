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
    m("popb-span-run-at-span-start", "rmqrun/broker/store/record.py",
      "each record of a span is checked where the span starts, not at its own position: the records after the "
      "first fail their seal and are never served",
      "    for pos, size in span:\n        off = pos - start\n",
      "    off = span[0][0] - start if span else 0\n    for pos, size in span:\n",
      U + "broker/test_store_get.py::test_records_close_together_are_read_with_one_read",
      U + "broker/test_store_get.py::test_interleaved_queues_read_correct_records"),
    # ---------------------------------------------------------------- popbrk: broker CPU per popped message (#32, round 3)
    m("popbrk-cq-read-whole-scan", "rmqrun/broker/store/queue_reader.py",
      "a pull or pop without a filter reads the whole 800-entry scan of its consume queue again (16 KiB per request)",
      "    chunk = max_msgs + 1\n", "    chunk = end - offset\n",
      U + "broker/test_store_get.py::test_a_pull_without_a_filter_reads_only_its_batch_of_queue_entries"),
    m("popbrk-cq-read-past-scan", "rmqrun/broker/store/queue_reader.py",
      "a filtered read goes on past the scan's end: a pull skips more than RocketMQ's bound per request",
      "cq.read_entries(index, min(end - index, chunk))", "cq.read_entries(index, chunk)",
      U + "broker/test_store_get.py::test_filter_scan_is_bounded_per_pull"),
    m("popbrk-handed-over-no-flush", "rmqrun/broker/processors/pop.py",
      "a POP answer goes out without awaiting the checkpoint log: in SYNC mode before its checkpoint lines are "
      "fsync'ed (a power cut right after it loses them: a popped message never revived)",
      "            await self.broker.pop.ck_log.durable()\n        return resp",
      "            pass\n        return resp",
      I + "test_broker_pop_acks.py::test_in_sync_mode_every_pop_and_ack_answer_follows_an_fsync_of_its_checkpoint_lines"),
    m("popbrk-handed-over-skips-fsync", "rmqrun/broker/pop/ck_log.py",
      "in SYNC flush mode a POP or ACK is answered before its checkpoint lines are fsync'ed",
      "        if not self._fsync:\n            return _HANDED\n        return self.sync()",
      "        return _HANDED",
      U + "broker/test_pop_checkpoints.py::test_durable_hands_the_lines_to_the_os_at_once_and_waits_only_for_a_sync_mode_fsync",
      I + "test_broker_pop_acks.py::test_in_sync_mode_every_pop_and_ack_answer_follows_an_fsync_of_its_checkpoint_lines"),
    m("popbrk-ck-stats-one-per-pop", "rmqrun/broker/stats.py",
      "a pop's checkpoints counted once per pop: GROUP_CK_NUMS undercounts a pop that read several queues",
      "        self.table.add(GROUP_CK_NUMS, key, n, n)", "        self.table.add(GROUP_CK_NUMS, key, 1, 1)",
      U + "broker/test_broker_stats_table.py::test_checkpoints_counted_together_read_as_one_call_each"),
    m("popbrk-pop-answer-declaration-order", "rmqrun/broker/processors/common.py",
      "a pop's JSON answer carries its fields in declaration order: no longer the frame a Java broker sends",
      "    if cmd.serialize_type == SerializeType.JSON:\n        fields = {k: fields[k] for k in",
      "    if False:\n        fields = {k: fields[k] for k in",
      U + "broker/test_broker_answer_text.py"),
    m("popbrk-msg-offsets-trailing-comma", "rmqrun/protocol/pop.py",
      "a pop answer's msgOffsetInfo lists each queue's offsets with a comma after the last: a client cannot "
      "read it (no receipt for any message)",
      "    return (\"%d,\" * len(values) % values)[:-1]", "    return (\"%d,\" * len(values) % values)",
      U + "protocol/test_protocol_pop.py::test_offset_infos_encode_and_parse"),
    # ---------------------------------------------------------------- popbrk2: POP answers and the checkpoint log (#32)
    m("popbrk2-ack-answer-before-fsync", "rmqrun/broker/processors/pop_ack.py",
      "in SYNC flush mode an ACK is answered before its ack record is fsync'ed (a power cut after the answer "
      "revives an acked message)",
      "        await self.broker.pop.ck_log.durable()\n        return answer(cmd, typed=False)",
      "        return answer(cmd, typed=False)",
      I + "test_broker_pop_acks.py::test_in_sync_mode_every_pop_and_ack_answer_follows_an_fsync_of_its_checkpoint_lines"),
    m("popbrk2-batch-ack-answer-before-fsync", "rmqrun/broker/processors/pop_ack.py",
      "in SYNC flush mode a batch ack is answered before its records are fsync'ed",
      "        await pop.ck_log.durable()\n        return cmd.response(ResponseCode.SUCCESS)",
      "        return cmd.response(ResponseCode.SUCCESS)",
      I + "test_broker_pop_acks.py::test_in_sync_mode_every_pop_and_ack_answer_follows_an_fsync_of_its_checkpoint_lines"),
    m("popbrk2-change-invisible-answer-before-fsync", "rmqrun/broker/processors/pop_ack.py",
      "in SYNC flush mode a change of invisible time is answered before its new checkpoint is fsync'ed",
      "        await pop.ck_log.durable()\n        return answer(cmd, header=",
      "        return answer(cmd, header=",
      I + "test_broker_pop_acks.py::test_in_sync_mode_every_pop_and_ack_answer_follows_an_fsync_of_its_checkpoint_lines"),
    m("popbrk2-ck-log-failed-write-drops-lines", "rmqrun/broker/pop/ck_log.py",
      "a checkpoint log write that fails (a full disk) drops the lines it did not write: popped messages never "
      "revived after a restart",
      "        done = 0\n        try:", "        pending.clear()\n        done = 0\n        try:",
      U + "broker/test_pop_checkpoints.py::test_a_write_that_fails_half_way_loses_no_line_and_leaves_no_glued_one"),
    m("popbrk2-ck-log-torn-line-glued", "rmqrun/broker/pop/ck_log.py",
      "after a short write the torn line is not ended: the next flush's first line is glued to it and lost",
      "        if self._torn:  # a failed write", "        if False:  # a failed write",
      U + "broker/test_pop_checkpoints.py::test_a_write_that_fails_half_way_loses_no_line_and_leaves_no_glued_one"),
]
