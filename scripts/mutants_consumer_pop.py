"""Mutants of the push consumer's POP client: its pop loop and flow control, the one-pass answer decode, receipts
and batch acks, redelivery after a kill, POP jobs (entries as in :mod:`mutant_kit`; joined by :mod:`mutants_table`).
Kept apart from :mod:`mutants_consumer` so each table stays under the 600-line limit.
"""

from __future__ import annotations

from mutant_kit import I, U, Mutant, m

MUTANTS: list[Mutant] = [
    # ---------------------------------------------------------------- the POP client (#24)
    m("pop-invisibility-not-extended", "rmqrun/consumer/pop_consume.py",
      "a POP handler call running past the invisible time is not extended: another client gets the message meanwhile",
      "                if entry.needs_extension(now, EXTEND_AT) and not entry.is_pop_timeout(now):",
      "                if False:",
      I + "test_pop_run.py::test_a_call_longer_than_the_invisible_time_is_not_delivered_twice"),
    m("pop-client-ack-wrong-offset", "rmqrun/client/pop_api.py", "a POP ack names the next offset, not the message's: "
      "the message comes back after its invisible time (and another may be acked unconsumed)",
      "extra_info=r.encode(), offset=r.queue_offset, bname=r.broker_name)",
      "extra_info=r.encode(), offset=r.queue_offset + 1, bname=r.broker_name)",
      U + "client/test_client_pop_api.py",
      I + "test_pop_run.py::test_a_call_longer_than_the_invisible_time_is_not_delivered_twice"),
    m("pop-orderly-suspends-failed-only", "rmqrun/consumer/pop_orderly.py",
      "orderly POP moves on past a failed message instead of retrying it in place: the rest of its queue runs "
      "before it succeeds",
      "                moved_on, suspend_ms, failed = await self._run_chunk(req, mq, live)\n                i += moved_on\n",
      "                moved_on, suspend_ms, failed = await self._run_chunk(req, mq, live)\n"
      "                i += moved_on + (moved_on < len(live) and suspend_ms is not None)\n",
      I + "test_pop_run.py::test_orderly_pop_retries_a_failed_message_before_the_rest_of_its_queue"),
    m("pop-orderly-count-ignored", "rmqrun/consumer/pop_orderly.py",
      "orderly POP ignores orderCountInfo: a batch that came back after a kill says reconsume_times 0 at its head, "
      "and a message that takes its instance down never reaches the DLQ",
      "    if head and order_count is not None and order_count > stored:",
      "    if False:",
      U + "consumer/test_pop_orderly.py"),
    m("pop-ack-stale-receipt", "rmqrun/consumer/pop_consume.py",
      "a POP ack names the receipt of the pop, not the one its last extension brought: the extended checkpoint "
      "stays un-acked and the message is delivered again",
      "                entry.receipt = new\n", "                pass\n",
      I + "test_pop_run.py::test_a_call_longer_than_the_invisible_time_is_not_delivered_twice"),
    # --- issue #32 (p32b): redelivery after a kill within the invisible time + 5 s; only begun calls extended;
    # a job that waited past its invisible time not started; status "last hour" unknown unless reported
    m("pop-revive-late", "rmqrun/broker/pop/revive.py",
      "the revive pass takes a checkpoint 6 s after its revive time: a killed instance's messages come back late",
      "                for ck in log.due(now_ms()):", "                for ck in log.due(now_ms() - 6000):",
      I + "test_pop_redelivery.py"),
    m("pop-extend-waiting", "rmqrun/consumer/pop_consume.py",
      "messages waiting for a worker are extended too: a killed instance's come back up to 2/3 of the invisible "
      "time late",
      "        begun = None if self.extends_waiting else self._begun()", "        begun = None",
      I + "test_pop_redelivery.py", U + "consumer/test_pop_consume_results.py"),
    m("pop-job-expiry-ignored", "rmqrun/consumer/pop_queue.py",
      "a job whose messages lapsed while waiting for a worker is still started (the broker may have handed "
      "them out again)",
      "        return bool(self.entries) and now_ms() >= min(map(VISIBLE_AT, self.entries))", "        return False",
      U + "consumer/test_pop_consume_results.py::test_a_job_whose_messages_lapsed_while_waiting_reads_as_dropped"),
    m("pop-status-hour-zero", "rmqrun/admin/pop_status.py",
      "a master that did not report its revive figure counts as 0 (\"last hour 0\" on an Apache broker)",
      "    if not per_master or any(n is None for n in per_master):", "    if not per_master:",
      U + "admin/test_pop_status_view.py::test_last_hour_is_known_only_when_every_master_reported_it"),
    m("pop-inflight-unbounded", "rmqrun/consumer/pop_loop.py",
      "the pops on the wire are not counted by flow control: un-acked can reach the threshold + three pops",
      "        if pq.held > limit:",
      "        if pq.wait_ack_count > limit:",
      U + "consumer/test_pop_loop_inflight.py::test_pops_in_flight_fill_the_threshold_and_no_more"),
    m("pop-inflight-orderly", "rmqrun/consumer/pop_loop.py",
      "orderly POP puts several pops on the wire too",
      "    if config.orderly:\n        return 1\n", "",
      U + "consumer/test_pop_loop_inflight.py::test_pops_in_flight_fill_the_threshold_and_no_more"),
    m("pop-window-one-queue", "rmqrun/consumer/pop_loop.py",
      "an assignment of every queue keeps Java's one threshold: a no-op drain paced at 96 per pop round trip",
      "    wide = base * req.queues\n", "    wide = base\n",
      U + "consumer/test_pop_loop_inflight.py::test_the_window_of_many_queues_holds_no_more_than_half_a_second_of_"
      "the_workers_time"),
    m("pop-window-unbounded", "rmqrun/consumer/pop_loop.py",
      "slow handlers get the wide window too: popped messages wait past their invisible time and a stop's grace",
      "        wide = min(wide, int(workers * QUEUED_WORK_S / handler_s_per_msg))\n", "        pass\n",
      U + "consumer/test_pop_loop_inflight.py::test_the_window_of_many_queues_holds_no_more_than_half_a_second_of_"
      "the_workers_time"),
    m("pop-window-orderly", "rmqrun/consumer/pop_loop.py",
      "orderly POP widens its window with the queues as well",
      "    if config.orderly or req.queues <= 1 or handler_s_per_msg is None:",
      "    if req.queues <= 1 or handler_s_per_msg is None:",
      U + "consumer/test_pop_loop_inflight.py::test_the_window_of_many_queues_holds_no_more_than_half_a_second_of_"
      "the_workers_time"),
    m("pop-inflight-one-per-queue-ignored", "rmqrun/consumer/pop_loop.py",
      "an assignment of every queue keeps three pops on the wire whatever its window",
      "    return max(POPS_IN_FLIGHT, min(req.queues, MAX_POPS_IN_FLIGHT))", "    return POPS_IN_FLIGHT",
      U + "consumer/test_pop_loop_inflight.py::test_an_assignment_of_every_queue_pops_each_queue_s_share_once_the_"
      "handler_is_known_quick"),
    m("pop-queues-any-broker", "rmqrun/consumer/pop_push.py",
      "an assignment of every queue counts the topic's queues on every broker, not on its own",
      "                    if q.broker_name == mq.broker_name and is_readable(q.perm)] + [1])",
      "                    if is_readable(q.perm)] + [1])",
      U + "consumer/test_pop_push.py::test_an_assignment_of_every_queue_counts_the_topic_s_queues_on_its_broker_"
      "and_follows_a_topic_update"),
    m("pop-queues-not-refreshed", "rmqrun/consumer/pop_push.py",
      "a topic updated after its assignment began keeps the queue count it had",
      "                req.queues = self._queues_covered(mq)  # a topic updated since: flow control follows",
      "                pass",
      U + "consumer/test_pop_push.py::test_an_assignment_of_every_queue_counts_the_topic_s_queues_on_its_broker_"
      "and_follows_a_topic_update"),
    m("pop-room-last-waiter-only", "rmqrun/consumer/pop_queue.py",
      "acks wake only the loop that waited last: the others sleep out their 50 ms",
      "        for at, room in self._room:", "        for at, room in self._room[-1:]:",
      U + "consumer/test_pop_loop_inflight.py::test_every_loop_held_by_flow_control_wakes_when_acks_make_its_room"),
    # ---------------------------------------------------------------- h32: POP client per-message cost (#32)
    m("h32-pop-ack-holds-flow-slot", "rmqrun/consumer/pop_acks.py",
      "a success queued for its ack still counts as un-acked until the broker answers: the pop loop's flow "
      "control holds the pipeline at a few messages (and nothing frees the slot once answered)",
      "        pq.done_all(entries)  # outcomes decided, acks on their way",
      "        pass  # outcomes decided, acks on their way",
      U + "consumer/test_pop_consume.py::test_an_ack_on_its_way_frees_flow_control_but_the_job_waits_for_the_"
      "brokers_answer"),
    m("h32-pop-ack-job-ends-at-first-answer", "rmqrun/consumer/pop_acks.py",
      "a job whose acks went in two requests ends at the first answer: a stop's grace cuts the other short",
      "        if self.left <= 0 and not self.done.done():",
      "        if not self.done.done():",
      U + "consumer/test_pop_consume.py::test_a_job_whose_acks_go_in_two_requests_ends_only_once_both_are_answered"),
    m("h32-pop-decode-missing-start-accepted", "rmqrun/client/pop_api.py",
      "a pop answer whose startOffsetInfo lacks a message's queue is read, its receipt naming no checkpoint",
      "            if start is None:  # receipt_for raises", "            if False:  # receipt_for raises",
      U + "client/test_client_pop_api.py::test_a_normal_message_without_start_offsets_or_missing_from_them"),
    m("h32-pop-decode-no-start-info-zero", "rmqrun/client/pop_api.py",
      "an answer without startOffsetInfo gives every receipt ck offset 0, not the message's own offset",
      "            start = starts.get((flag, queue_id)) if starts else queue_offset",
      "            start = starts.get((flag, queue_id)) if starts else 0",
      U + "client/test_client_pop_api.py::test_a_normal_message_without_start_offsets_or_missing_from_them"),
    m("h32-pop-refilter-skipped", "rmqrun/consumer/pop_loop.py",
      "popped messages are never re-filtered by tag: a tag-hash collision reaches the handler",
      "    if sub.matches_tag(None):  # the subscription filters nothing",
      "    if True:  # the subscription filters nothing",
      U + "consumer/test_pop_loop_inflight.py::test_popped_messages_are_refiltered_by_tag_and_the_unwanted_acked"),
    m("h32-pop-refilter-star-filters", "rmqrun/consumer/pop_loop.py",
      "a '*' subscription re-filters too: untagged messages are acked unconsumed",
      "    if sub.matches_tag(None):  # the subscription filters nothing (no tag set): every message is wanted\n"
      "        wanted = popped  # made as PopEntry by the decoder: nothing more per message\n"
      "    else:\n        for msg in popped:\n            if _tag_matches(sub, msg):",
      "    if False:\n        pass\n    else:\n        for msg in popped:\n"
      "            if msg.tags is not None and _tag_matches(sub, msg):",
      U + "consumer/test_pop_loop_inflight.py::test_popped_messages_are_refiltered_by_tag_and_the_unwanted_acked"),
    # ---------------------------------------------------------------- h32b: POP jobs merged across pops (#32)
    m("h32b-pop-lane-never-flushed", "rmqrun/consumer/pop_consume.py",
      "a queue's job coming back from the executor does not free its lane: later pops' messages wait forever",
      "            lane.out -= 1", "            pass",
      U + "consumer/test_pop_merged_jobs.py::test_two_pops_of_one_queue_become_one_job_and_each_message_keeps_its_"
      "outcome"),
    m("h32b-pop-merged-job-unsorted", "rmqrun/consumer/pop_consume.py",
      "a job merged from several pops keeps their arrival order, not the queue's offset order",
      "            waiting.sort(key=ORDER)", "            pass",
      U + "consumer/test_pop_merged_jobs.py::test_two_pops_of_one_queue_become_one_job_and_each_message_keeps_its_"
      "outcome"),
    m("h32b-pop-merged-job-unbounded", "rmqrun/consumer/pop_consume.py",
      "a lane hands everything waiting over as one job, past job_size (one slow call's worth)",
      "                chunk = waiting[:size]", "                chunk = waiting[:]",
      U + "consumer/test_pop_merged_jobs.py::test_slow_calls_keep_one_job_per_handler_call_and_a_stop_hands_over_"
      "what_waits"),
    m("h32b-pop-stop-keeps-lanes", "rmqrun/consumer/pop_consume.py",
      "a stop leaves the messages waiting in a lane unconsumed (they come back only after their invisible time)",
      "        self._stopping = True", "        self._stopping = False",
      U + "consumer/test_pop_merged_jobs.py::test_slow_calls_keep_one_job_per_handler_call_and_a_stop_hands_over_"
      "what_waits"),
    m("h32b-pop-stop-flushes-no-lane", "rmqrun/consumer/pop_consume.py",
      "a stop does not hand over what waits in a lane (a lane due two steps later included): those messages come "
      "back only after their invisible time",
      "        for lane in list(self._lanes.values()):\n            self._flush(lane, self.job_size())\n",
      "",
      U + "consumer/test_pop_merged_jobs.py::test_slow_calls_keep_one_job_per_handler_call_and_a_stop_hands_over_"
      "what_waits"),
    m("h32b-pop-fast-path-any-success", "rmqrun/consumer/pop_consume.py",
      "a POP job with one success takes the all-succeeded path: its failures are acked, never retried",
      "        if len(verdicts) == len(entries) and verdicts.count(Status.SUCCESS) == len(entries):",
      "        if len(verdicts) == len(entries) and verdicts.count(Status.SUCCESS) > 0:",
      U + "consumer/test_pop_consume.py::test_successes_are_acked_together_and_failures_delayed_by_their_count",
      U + "consumer/test_pop_merged_jobs.py::test_two_pops_of_one_queue_become_one_job_and_each_message_keeps_its_"
      "outcome"),
    # ---------------------------------------------------------------- h32c: POP supervisor path per job (#32)
    m("h32c-pop-entry-lapse-stale", "rmqrun/consumer/pop_queue.py",
      "an extension's new receipt does not move the message's lapse time: an extended job reads as lapsed",
      "    def receipt(self, receipt: ReceiptHandle) -> None:\n        self._receipt = receipt\n"
      "        self.visible_at = receipt.pop_time + receipt.invisible_time",
      "    def receipt(self, receipt: ReceiptHandle) -> None:\n        self._receipt = receipt",
      U + "consumer/test_pop_job_paths.py::test_a_jobs_lapse_follows_each_messages_newest_receipt"),
    m("h32c-pop-expiry-fast-path-latest", "rmqrun/consumer/pop_consume.py",
      "a job is taken as live when its latest message has not lapsed: its lapsed ones are run too",
      "        if not entries or now < min(map(VISIBLE_AT, entries)):",
      "        if not entries or now < max(map(VISIBLE_AT, entries)):",
      U + "consumer/test_pop_job_paths.py::test_a_job_whose_message_lapsed_before_it_ran_runs_only_the_live_ones"),
    m("h32c-pop-done-all-no-wake", "rmqrun/consumer/pop_queue.py",
      "a job's messages leave flow control but the pop loops waiting for room are not woken",
      "        self.entries.difference_update(entries)\n        if self._room:\n            self._wake()",
      "        self.entries.difference_update(entries)",
      U + "consumer/test_pop_job_paths.py::test_a_job_done_at_once_leaves_flow_control_and_wakes_a_waiting_pop"),
    m("h32c-pop-ack-split-drops-one", "rmqrun/consumer/pop_acks.py",
      "a job cut across two ack requests loses the first message of its second part (never acked: delivered again)",
      "                item = item.cut(room)", "                item = item.cut(room + 1)",
      U + "consumer/test_pop_job_paths.py::test_a_big_job_is_acked_in_requests_of_the_batch_max_each_message_once_"
      "with_its_receipt"),
    m("h32c-pop-ack-request-unbounded", "rmqrun/consumer/pop_acks.py",
      "a job's acks go in one request however many there are (ACK_BATCH_MAX ignored)",
      "                if len(item.entries) <= room:", "                if True:",
      U + "consumer/test_pop_job_paths.py::test_a_big_job_is_acked_in_requests_of_the_batch_max_each_message_once_"
      "with_its_receipt"),
    m("h32c-pop-batch-ack-word-last-only", "rmqrun/protocol/pop_batch_ack.py",
      "the batch ack keeps only the last offset of a checkpoint's run with a gap: the others are never acked",
      "        word |= 1 << (offset - start)", "        word = 1 << (offset - start)",
      U + "client/test_pop_answer_lazy_fields.py::test_the_one_pass_batch_ack_says_what_build_batch_acks_says",
      U + "protocol/test_batch_ack_runs.py"),
    # ---------------------------------------------------------------- popcol: one object per popped message, acks by run
    m("popcol-ack-run-word-first-run-only", "rmqrun/protocol/pop_batch_ack.py",
      "a checkpoint met in two runs of a batch ack keeps only its first run's offsets: the others are never acked",
      "            words[key] = got | word", "            words[key] = got",
      U + "protocol/test_batch_ack_runs.py"),
    m("popcol-ack-run-word-short", "rmqrun/protocol/pop_batch_ack.py",
      "a run's word misses its last offset: that message is never acked (delivered again)",
      "        return ((1 << len(picked)) - 1) << (low - start)",
      "        return ((1 << len(picked) - 1) - 1) << (low - start)",
      U + "protocol/test_batch_ack_runs.py"),
    m("popcol-ack-run-before-start", "rmqrun/protocol/pop_batch_ack.py",
      "an offset before its checkpoint's start is taken in silence (a wrong bit, or a negative shift) instead of "
      "refused", "        if low < start:\n", "        if False:\n",
      U + "protocol/test_batch_ack_runs.py"),
    m("popcol-job-by-offset-only", "rmqrun/client/pop_message.py",
      "a job's messages are placed by offset alone: queues interleave, and a checkpoint's acks are read one "
      "receipt at a time", "        self.order_base = head[6] << 64", "        self.order_base = 0",
      U + "consumer/test_pop_mixed_queue_jobs.py::test_a_pop_of_two_queues_is_one_job_and_each_message_acts_"
      "with_its_own_receipt_and_queue"),
    m("popcol-entry-message-plain", "rmqrun/consumer/pop_loop.py",
      "an answer from a client that made plain messages is handed over as they are: no entry state (settled, "
      "extending) to keep",
      "    if popped[0].__class__ is not PopEntry:", "    if False:",
      U + "consumer/test_pop_loop_inflight.py::test_popped_messages_are_refiltered_by_tag_and_the_unwanted_acked"),
    m("h32c-pop-lazy-tags-none", "rmqrun/client/pop_message.py",
      "a popped message's tags read as None: a tag subscription drops (acks unseen) every message",
      "            self._tags = _property(props, _B_TAGS) if _B_TAGS in props else None",
      "            self._tags = None",
      U + "client/test_pop_answer_lazy_fields.py::test_records_a_java_broker_wrote_pop_with_the_tags_and_counts_"
      "the_full_decoder_reads"),
    m("h32c-pop-first-pop-time-zero", "rmqrun/client/pop_message.py",
      "a record without 1ST_POP_TIME reads first popped at 0, not at this pop",
      "                self._first_pop_time = int(first) if first else self._pop_time",
      "                self._first_pop_time = int(first) if first else 0",
      U + "client/test_pop_answer_lazy_fields.py::test_1st_pop_time_is_read_when_asked_and_a_bad_one_falls_back_"
      "to_the_pops_time"),
    m("h32c-pop-header-template-shared", "rmqrun/client/pop_api.py",
      "every pop of an assignment sends the one cached header dict: what one request adds reaches the next",
      "        ext = template.copy()", "        ext = template",
      U + "client/test_pop_answer_lazy_fields.py::test_a_pops_header_is_built_once_per_settings_and_each_pop_has_"
      "its_own_born_time"),
    m("h32c-pop-lanes-one-per-pop", "rmqrun/consumer/pop_consume.py",
      "a pop bringing the pop retry topic's messages beside the topic's goes to one lane: the retry topic's "
      "messages share a job under the topic's name (since jobs hold several queues, the lane is the topic)",
      "        elif (keys := list(map(_LANE_KEY, entries))) and keys.count(keys[0]) == len(keys):",
      "        elif (keys := list(map(_LANE_KEY, entries))):",
      U + "consumer/test_pop_mixed_queue_jobs.py::test_a_retry_topics_messages_are_a_job_of_their_own"),
    # ---------------------------------------------------------------- s6p: POP supervisor CPU per message (#32)
    m("s6p-pop-one-pass-retry-record", "rmqrun/client/pop_api.py",
      "the one-pass pop decoder reads a record of the pop retry topic (it carries its own POP_CK) with a receipt "
      "built from the header: its ack names the wrong checkpoint and topic, and it is delivered again",
      "                    or find(_B_POP_CK, p, end) >= 0):", "                    or False):",
      U + "client/test_pop_answer_one_pass.py::test_what_the_one_pass_does_not_take_whole_comes_out_as_the_"
      "general_reader_has_it"),
    m("s6p-pop-one-pass-any-topic", "rmqrun/client/pop_api.py",
      "the one-pass pop decoder takes every record for the first one's topic: another topic's message is acked "
      "and handed to the handler under the wrong name",
      "                    or not startswith(field, at) or body[p - 2] >= 0x80",
      "                    or body[p - 2] >= 0x80",
      U + "client/test_pop_answer_one_pass.py::test_what_the_one_pass_does_not_take_whole_comes_out_as_the_"
      "general_reader_has_it"),
    m("s6p-pop-one-pass-negative-props", "rmqrun/client/pop_api.py",
      "the one-pass pop decoder reads a properties length past a short's range as unsigned: a record the "
      "general reader refuses is consumed",
      " or body[p - 2] >= 0x80 or ", " or ",
      U + "client/test_pop_answer_one_pass.py::test_a_bad_answer_the_one_pass_leaves_gets_the_general_readers_"
      "error"),
    m("s6p-pop-one-pass-missing-start", "rmqrun/client/pop_api.py",
      "the one-pass pop decoder makes up a checkpoint start for a queue the answer's startOffsetInfo lacks (its "
      "acks name a checkpoint the broker never wrote) instead of refusing the answer",
      "                if run_start is None:\n                    return None",
      "                if run_start is None:\n                    run_start = queue_offset",
      U + "client/test_pop_answer_one_pass.py::test_a_bad_answer_the_one_pass_leaves_gets_the_general_readers_"
      "error"),
    m("s6p-pop-one-pass-store-time", "rmqrun/client/pop_api.py",
      "the one-pass pop decoder hands no store time on: the store-to-handler latency of popped messages is lost",
      "append(make(view[pos:end], run, queue_offset, reconsume, p - pos, stored))",
      "append(make(view[pos:end], run, queue_offset, reconsume, p - pos, 0))",
      U + "client/test_pop_answer_one_pass.py::test_the_usual_answer_is_read_in_one_pass_as_the_general_reader_"
      "reads_it"),
    m("s6p-pop-store-time-ipv6", "rmqrun/client/pop_api.py",
      "a popped record with an IPv6 host has its store time read at the IPv4 position",
      "            (stored,) = _LONG.unpack_from(body, pos + store_timestamp_pos(sys_flag))", "            pass",
      U + "client/test_pop_answer_lazy_fields.py::test_each_popped_message_has_its_records_store_time"),
    m("s6p-store-times-not-run-counted", "rmqrun/consumer/push.py",
      "store times handed over by POP count messages that never reached the handler (NOT_RUN) in the "
      "store-to-handler histogram",
      "                    stored = [s for s, v in zip(stored, result.verdicts) if v is not Status.NOT_RUN]",
      "                    stored = list(stored)",
      U + "consumer/test_store_to_handler_batch.py::test_store_times_a_caller_read_already_count_what_the_records_"
      "count"),
    m("s6p-pop-batch-ack-run-with-gap", "rmqrun/protocol/pop_batch_ack.py",
      "a checkpoint's acked offsets with a gap are taken for a run: the message in the gap is acked unconsumed",
      "    if max(picked) - low + 1 == len(picked):", "    if True:",
      U + "client/test_pop_answer_lazy_fields.py::test_one_checkpoints_run_of_offsets_is_acked_as_the_general_"
      "path_acks_it"),
    m("s6p-pop-batch-ack-run-any-flag", "rmqrun/protocol/pop_batch_ack.py",
      "receipts of one queue, start and pop time but another retry flag are taken for one checkpoint: the "
      "retried message's ack names the wrong topic",
      "_CK_KEY = itemgetter(4, 6, 0, 1)", "_CK_KEY = itemgetter(6, 6, 0, 1)",
      U + "client/test_pop_answer_lazy_fields.py::test_one_checkpoints_run_of_offsets_is_acked_as_the_general_"
      "path_acks_it"),
    m("s6p-pop-batch-ack-merge-keeps-last", "rmqrun/client/pop_api.py",
      "acks of one checkpoint that came in two jobs keep only the last job's offsets: the first job's messages "
      "are never acked and come back", "        got[2] |= word", "        got[2] = word",
      U + "client/test_client_pop_api.py::test_one_batch_ack_request_names_each_checkpoint_once_whatever_jobs_its_"
      "receipts_came_in"),
    m("s6p-pop-ack-job-one-topic", "rmqrun/consumer/pop_acks.py",
      "a job whose messages name two topics is batch-acked under one of them: the others' acks name the wrong "
      "topic and miss their checkpoint", "        if len(topics) == 1:", "        if topics:",
      U + "consumer/test_pop_job_paths.py::test_a_batch_ack_names_each_receipt_with_the_topic_its_own_message_"
      "was_sent_to"),
    m("s6p-pop-flow-wait-no-timeout", "rmqrun/consumer/pop_queue.py",
      "a pop loop held by flow control waits only for acks, never looking again after its timeout",
      "        timer = loop.call_later(timeout, _time_up, room)",
      "        timer = loop.call_later(3600, _time_up, room)",
      U + "consumer/test_pop_loop_inflight.py::test_a_loop_held_by_flow_control_looks_again_after_its_timeout_and_"
      "a_cancelled_one_leaves_nothing"),
    m("s6p-ack-entry-receipt-fields-swapped", "rmqrun/protocol/pop_batch_ack.py",
      "a batch ack entry built from a receipt swaps its revive queue and invisible time: the broker files the "
      "ack under another revive queue, the checkpoint is revived and its messages handled twice",
      "return cls(group, topic, f[4], f[0], f[6], f[3], f[1], f[2], word)",
      "return cls(group, topic, f[4], f[0], f[6], f[2], f[1], f[3], word)",
      U + "client/test_pop_answer_lazy_fields.py::test_the_one_pass_batch_ack_says_what_build_batch_acks_says"),
    # ---------------------------------------------------------------- POP jobs of several queues (#32, popjob)
    m("pj-pop-job-failure-job-queue", "rmqrun/consumer/pop_consume.py",
      "a failed message of a job of several queues is sent back and logged under the job's queue -1, not its own",
      "steps.append(self._failed(req.pq, mq if whole else _broker_mq(entry), entry,",
      "steps.append(self._failed(req.pq, mq, entry,",
      U + "consumer/test_pop_mixed_queue_jobs.py::test_a_pop_of_two_queues_is_one_job_and_each_message_acts_"
      "with_its_own_receipt_and_queue"),
    m("pj-pop-job-undecodable-job-queue", "rmqrun/consumer/pop_consume.py",
      "an undecodable message of a job of several queues is dead-lettered under the job's queue -1",
      "steps.append(self._undecodable(req.pq, mq if whole else _broker_mq(entry), entry,",
      "steps.append(self._undecodable(req.pq, mq, entry,",
      U + "consumer/test_pop_mixed_queue_jobs.py::test_a_pop_of_two_queues_is_one_job_and_each_message_acts_"
      "with_its_own_receipt_and_queue"),
    m("pj-pop-job-queue-of-first", "rmqrun/consumer/pop_consume.py",
      "a job of several queues is named by its first message's queue: the others' failures name that queue",
      "first.queue_id if len(queue_ids) == 1 else -1)", "first.queue_id)",
      U + "consumer/test_pop_mixed_queue_jobs.py::test_a_pop_of_two_queues_is_one_job_and_each_message_acts_"
      "with_its_own_receipt_and_queue"),
    m("pj-pop-lane-takes-retry-topic", "rmqrun/consumer/pop_consume.py",
      "the pop retry topic's messages share a job with the topic's: their acks and the pipe's topic name the "
      "wrong topic", '_LANE_KEY = attrgetter("run.ack_topic", "run.broker_name")',
      '_LANE_KEY = attrgetter("run.broker_name", "run.broker_name")',
      U + "consumer/test_pop_mixed_queue_jobs.py::test_a_retry_topics_messages_are_a_job_of_their_own"),
    m("pj-pop-begun-by-offset", "rmqrun/consumer/pop_consume.py",
      "begun calls are matched by offset even where the executor names them by index: a message of another "
      "queue at the same offset, still waiting for a worker, is extended (and comes back late after a kill)",
      'by_index = getattr(executor, "handler_call_indexes", None)', "by_index = None",
      U + "consumer/test_pop_mixed_queue_jobs.py::test_only_the_begun_call_is_extended_when_two_queues_share_"
      "its_offset"),
    m("pj-executor-isolated-index", "rmqrun/supervisor/executor.py",
      "an isolated re-run's begun call is named by its index in its one-message batch, not in its job: the "
      "wrong message is extended", "job=parent.job, first=parent.first + i)", "job=parent.job)",
      U + "supervisor/test_call_indexes.py"),
    m("pj-executor-split-index", "rmqrun/supervisor/executor.py",
      "a split's tail names its begun calls from index 0: the head's messages are taken as begun",
      "job=pending.job, first=pending.first + index)", "job=pending.job)",
      U + "supervisor/test_call_indexes.py"),
    m("pj-pop-hold-always-two", "rmqrun/consumer/pop_consume.py",
      "short calls keep two jobs of a lane out per worker: what pops bring goes as jobs of one pop each (the "
      "supervisor's worker-pipe round trips per message stay ~3x pull's)",
      "        if per_msg is not None and per_msg < SHORT_CALL_S:\n            return self.workers()\n", "",
      U + "consumer/test_pop_mixed_queue_jobs.py::test_a_lane_holds_one_job_per_worker_while_calls_are_shorter_"
      "than_the_supervisors_cost"),
    m("pop-hold-one-job-in-all", "rmqrun/consumer/pop_consume.py",
      "short calls keep one job of a lane out in all: with an assignment's wide window one worker idles while "
      "the other runs (no-op POP/pull medians 0.62-0.85 against 0.82-0.85 with a job per worker)",
      "        if per_msg is not None and per_msg < SHORT_CALL_S:\n            return self.workers()\n",
      "        if per_msg is not None and per_msg < SHORT_CALL_S:\n            return 1\n",
      U + "consumer/test_pop_mixed_queue_jobs.py::test_a_lane_holds_one_job_per_worker_while_calls_are_shorter_"
      "than_the_supervisors_cost"),
    m("pj-pop-hold-two-whatever-workers", "rmqrun/consumer/pop_consume.py",
      "slow calls hold two jobs of a lane out whatever the workers: with more workers the others idle while "
      "the assignment's messages wait",
      "        return HOLD_JOBS * self.workers()\n", "        return HOLD_JOBS\n",
      U + "consumer/test_pop_mixed_queue_jobs.py::test_a_lane_holds_one_job_per_worker_while_calls_are_shorter_"
      "than_the_supervisors_cost"),
    m("pj-pop-flush-at-once", "rmqrun/consumer/pop_consume.py",
      "a lane is flushed as each pop answer is handed over: the answers read in one turn go as one job each",
      "        self._due.add(lane)\n", "        self._flush(lane, self.job_size())\n",
      U + "consumer/test_pop_mixed_queue_jobs.py::test_the_pops_answered_in_one_turn_of_the_loop_make_"
      "one_job"),
    m("pj-collector-not-frozen", "rmqrun/cli/run/collector.py",
      "the supervisor's startup objects stay in the collector's full walks", "    gc.freeze()\n", "",
      U + "cli/test_collector.py"),
    # ---------------------------------------------------------------- popcli: POP flow control and lanes (#32)
    m("popcli-room-ignores-pops-on-wire", "rmqrun/consumer/pop_queue.py",
      "a loop held for room is woken by the un-acked count alone: the pops on the wire are not counted, so it "
      "pops past the threshold + one pop",
      "        left = self.held", "        left = len(self.entries)",
      U + "consumer/test_pop_loop_inflight.py::test_a_loop_held_for_room_counts_the_pops_on_the_wire_when_woken_and_a"
          "_short_answer_makes_room"),
    m("popcli-release-wakes-nobody", "rmqrun/consumer/pop_queue.py",
      "a pop's short or empty answer makes room but wakes no loop (it waits for the next ack or its timeout)",
      "        self.popping -= n\n        if self._room:\n            self._wake()", "        self.popping -= n",
      U + "consumer/test_pop_loop_inflight.py::test_a_loop_held_for_room_counts_the_pops_on_the_wire_when_woken_and_a"
          "_short_answer_makes_room"),
    m("popcli-wait-counts-unacked-only", "rmqrun/consumer/pop_queue.py",
      "a wait for room counts only the un-acked messages: it returns at once while the pops on the wire fill the "
      "threshold (a threshold under two pops spins the event loop)",
      "        if self.held <= threshold:\n            return",
      "        if len(self.entries) <= threshold:\n            return",
      U + "consumer/test_pop_loop_inflight.py::test_a_loop_held_for_room_counts_the_pops_on_the_wire_when_woken_and_a"
          "_short_answer_makes_room"),
    m("popcli-general-answer-called-plain", "rmqrun/client/pop_api.py",
      "an answer read by the general reader (retry-topic records, several topics) says it is one topic's: the "
      "consumer puts a retry topic's messages in the topic's lane",
      "    return PopResult(status, _records(body, header, group, broker_name, message_class), header.pop_time,\n"
      "                     header.invisible_time, header.rest_num)",
      "    out = _records(body, header, group, broker_name, message_class)\n"
      "    return PopResult(status, out, header.pop_time, header.invisible_time, header.rest_num,"
      " out[0].topic if out else None)",
      U + "client/test_pop_answer_one_pass.py"),
    m("popcli-lane-whatever-the-answer", "rmqrun/consumer/pop_loop.py",
      "the pop loop hands every answer's messages over as one lane of the assignment's topic, plain or not",
      "    lane = (result.plain_topic, mq.broker_name) if result.plain_topic is not None and req.original_topic is None",
      "    lane = (mq.topic, mq.broker_name) if True",
      U + "consumer/test_pop_loop_inflight.py::test_only_an_answer_the_decoder_calls_plain_skips_the_per_message_lane"
          "_and_flag_look"),
    # ---------------------------------------------------------------- popjob: a lane's job handed over in its flush (#32)
    m("popjob-handed-over-a-turn-late", "rmqrun/consumer/pop_consume.py",
      "a lane's job goes to the executor from its task's first step (run()), a turn after the flush made it: "
      "its messages hold their flow-control slots through that turn",
      "        future = submit(job) if submit is not None else asyncio.ensure_future(executor.run(job))\n",
      "        future = asyncio.ensure_future(executor.run(job))\n",
      U + "consumer/test_pop_mixed_queue_jobs.py::test_a_lanes_job_reaches_an_executor_with_submit_in_the_turn_the_"
          "lane_is_flushed"),
    m("popjob-nothing-left-keeps-lane-out", "rmqrun/consumer/pop_consume.py",
      "a lane's job with nothing left to run (every message lapsed, or the assignment dropped) is never given "
      "back: the lane counts it out for good and what pops bring next waits behind it",
      "        if handed is None:\n            self._job_back(lane)\n            return\n",
      "        if handed is None:\n            return\n",
      U + "consumer/test_pop_mixed_queue_jobs.py::test_a_lanes_job_with_nothing_left_to_run_gives_its_place_back"),
    # ---------------------------------------------------------------- popcol: a pop answer's run shared (#32)
    m("popcol-run-ack-before-start", "rmqrun/client/pop_api.py",
      "a run's offset before its checkpoint's start is acked in silence (a wrong bit, or a negative shift)",
      "                    if low < start:\n", "                    if False:\n",
      U + "client/test_pop_runs.py::test_a_run_offset_before_its_checkpoints_start_is_refused_as_a_receipts_is"),
    m("popcol-run-ack-drops-first", "rmqrun/client/pop_api.py",
      "a run's first message is left out of its batch ack: never acked, delivered again",
      "picked = set(receipts.offsets)", "picked = set(receipts.offsets[1:])",
      U + "client/test_pop_runs.py::test_run_receipts_are_acked_as_the_same_receipts_one_per_message"),
    m("popcol-checkpoint-json-queue", "rmqrun/protocol/pop_batch_ack.py",
      "the one-string batch ack body names the revive queue where the queue id goes: the broker acks another queue",
      '"q":{int(f[6])}', '"q":{int(f[3])}',
      U + "client/test_pop_runs.py::test_the_checkpoint_encoder_writes_what_the_general_body_encoder_writes"),
    m("popcol-own-receipt-ignored", "rmqrun/consumer/pop_acks.py",
      "a message an extension gave a receipt of its own is acked with its run's: the extended checkpoint stays "
      "un-acked and the message is delivered again",
      "        elif any(map(OWN_RECEIPT, entries)):", "        elif False:",
      U + "consumer/test_pop_job_paths.py::test_a_big_job_is_acked_in_requests_of_the_batch_max_each_message_once_"
          "with_its_receipt"),
    m("popcol-run-group-one-each", "rmqrun/consumer/pop_acks.py",
      "a job's runs are cut one message each, the offsets after the first run's first going to the wrong runs "
      "(checkpoints)", "                j = i + len(list(same))", "                j = i + 1",
      U + "consumer/test_pop_shared_runs.py::test_a_job_of_several_runs_acks_each_message_once_under_its_own_"
          "runs_checkpoint"),
    m("popcol-run-lapse-late", "rmqrun/client/pop_message.py",
      "a run's messages read as lapsing at twice their invisible time: a job that waited past it still runs",
      "        self.visible_at = head[1] + head[2]\n", "        self.visible_at = head[1] + head[2] * 2\n",
      U + "consumer/test_pop_shared_runs.py::test_a_run_whose_invisible_time_has_passed_is_not_consumed"),
    m("popcol-slow-path-run-per-checkpoint", "rmqrun/client/pop_api.py",
      "the general pop reader shares one run between messages of one checkpoint but different topics: one of "
      "them is handed out and acked under the other's topic",
      "        key = (topic, ack_topic, head)", "        key = head",
      U + "client/test_pop_runs.py::test_the_general_reader_gives_messages_of_one_checkpoint_but_two_topics_their_"
          "own_topics"),
    # ---------------------------------------------------------------- popsat: the batch-ack linger follows the rate (#32)
    m("popsat-ack-linger-never-grows", "rmqrun/consumer/pop_acks.py",
      "a slow consumer's acks keep the 10 ms linger: a request per few messages, and a broker wake-up each",
      "            self.linger = min(self.linger * 2, self.linger_max)",
      "            pass",
      U + "consumer/test_pop_ack_linger.py::test_a_slow_consumers_linger_grows_to_its_cap_and_every_message_is_"
      "acked_once"),
    m("popsat-ack-linger-not-reset-when-full", "rmqrun/consumer/pop_acks.py",
      "a consumer that sped up keeps the long linger of its slow spell",
      "            self.linger = ACK_LINGER_S  # requests fill up before the timer: a busy consumer",
      "            pass  # requests fill up before the timer: a busy consumer",
      U + "consumer/test_pop_ack_linger.py::test_a_request_that_fills_up_brings_the_linger_back_to_its_least"),
    m("popsat-ack-linger-ignores-invisible-time", "rmqrun/consumer/pop_acks.py",
      "a short invisible time does not bound the linger: an ack may wait a large share of its message's "
      "invisibility",
      "        share = ACK_LINGER_MAX_S if not invisible_ms else invisible_ms / 1000 * ACK_LINGER_SHARE",
      "        share = ACK_LINGER_MAX_S",
      U + "consumer/test_pop_ack_linger.py::test_the_linger_stays_within_a_share_of_a_short_invisible_time"),
    m("popsat-ack-linger-unbounded", "rmqrun/consumer/pop_acks.py",
      "the ack timer waits far past the linger: successes stay un-acked until their invisibility lapses",
      "            self._timer = loop.call_later(self.linger, self._flush_all)",
      "            self._timer = loop.call_later(self.linger * 10_000, self._flush_all)",
      U + "consumer/test_pop_ack_linger.py"),
]
