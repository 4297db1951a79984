"""The curated mutations of rmqrun's guarantee lines, for ``scripts/mutants.py``.

One entry per broken guarantee: ``find`` is exact text that must occur exactly
once in ``file`` (include a neighbouring line when a line alone is ambiguous),
``replace`` is what it becomes, and ``tests`` are the pytest ids (files or
``file::test``) that must fail. Keep ``tests`` small and precise: each mutant
runs only those, with ``-x``. Ids starting with ``canary-`` break code that runs
only inside worker processes: they are caught only if the workers import the
mutated copy.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mutant:
    id: str
    file: str
    what: str
    find: str
    replace: str
    tests: tuple[str, ...]


def m(id: str, file: str, what: str, find: str, replace: str, *tests: str) -> Mutant:
    return Mutant(id, file, what, find, replace, tuple(tests))


U = "tests/unit/"
I = "tests/integration/"
C = "tests/conformance/"
CC = "rmqrun/consumer/consume_concurrently.py"
CO = "rmqrun/consumer/consume_orderly.py"
PQ = "rmqrun/consumer/process_queue.py"
RT = "rmqrun/consumer/retry.py"
PL = "rmqrun/consumer/puller.py"
RB = "rmqrun/consumer/rebalance.py"
RP = "rmqrun/client/republish.py"
SLOW = I + "test_engine_concurrent.py::test_slow_message_holds_the_commit"
CHAIN = I + "test_engine_retry_chain.py"
ORD = I + "test_engine_orderly.py"
ORDX = I + "test_engine_orderly_locks.py"

_PUT_MESSAGES_HEAD = (
    "\n    async def put_messages(self, msgs: Sequence[InnerMessage]) -> list[Stored]:\n"
    "        \"\"\"Store messages of one queue back to back (a batch), then wake that queue's held pulls.\"\"\"\n"
    "        topic, queue_id = msgs[0].topic, msgs[0].queue_id\n"
    "        records = [m.to_record() for m in msgs]\n"
    "        codes = [m.tags_code for m in msgs]\n"
    "        results = self.store.put_many(topic, queue_id, records, codes)\n"
    "        self.stats.on_put(len(results), sum(len(r) for r in records))\n")

MUTANTS: list[Mutant] = [
    # ---------------------------------------------------------------- canaries (worker processes)
    m("canary-worker-raise-is-success", "rmqrun/worker/main.py",
      "a handler exception is reported as SUCCESS (runs only in worker processes)",
      "                    except Exception as exc:\n                        statuses[start:end] = bytes([fail]) * (end - start)",
      "                    except Exception as exc:\n                        statuses[start:end] = bytes(end - start)",
      CHAIN + "::test_send_back_refused_the_message_is_republished_to_the_retry_topic"),
    m("canary-worker-orderly-goes-on", "rmqrun/worker/main.py",
      "an orderly batch keeps calling the handler after a failed call",
      "                        self._log_exception(exc, offsets[start])\n                        if orderly:\n                            break",
      "                        self._log_exception(exc, offsets[start])\n                        if False:\n                            break",
      ORD + "::test_orderly_suspend_redelivers_same_message_first"),
    # ---------------------------------------------------------------- commit rule / min offset
    m("pq-remove-not-min", PQ, "remove_messages returns the top offset + 1 instead of the smallest cached",
      "        if first is not None:\n            return first\n        return self._drained_to()",
      "        if first is not None:\n            return self.queue_offset_max + 1\n        return self._drained_to()",
      U + "test_process_queue.py", SLOW),
    m("pq-commit-tail-while-cached", PQ, "an orderly commit jumps to the last pull's next-begin offset while messages "
      "are still cached", "        if not self._tree.entries and self.pulled_to > last + 1:",
      "        if self.pulled_to > last + 1:",
      U + "test_process_queue_tail.py", U + "test_offset_accounting_properties.py"),
    m("puller-no-tail-note", PL, "the puller does not tell the process queue how far a pull went (a tag-filtered "
      "tail keeps a lag of one)", "        dispatch = pq.put(entries, result.max_offset)\n        pq.note_pulled_to("
      "req.next_offset)\n", "        dispatch = pq.put(entries, result.max_offset)\n",
      I + "test_engine_tag_tail.py"),
    m("cc-commit-batch-end", CC, "concurrent commit = end of the finished batch, not the smallest unfinished offset",
      "            offset = pq.remove_messages([e.offset for e in entries])\n            if offset >= 0 and not pq.dropped:",
      "            offset = (pq.remove_messages([e.offset for e in entries]), entries[-1].offset + 1)[1]\n"
      "            if offset >= 0 and not pq.dropped:",
      SLOW),
    m("offsets-increase-only", "rmqrun/consumer/offsets.py", "increase-only offset updates may go backwards",
      "(offset > old if increase_only else offset != old)", "(offset != old)",
      U + "test_offsets.py"),
    m("offsets-negative", "rmqrun/consumer/offsets.py", "a negative offset (nothing to commit) is stored",
      "        if offset < 0:\n            logger.debug(", "        if offset < -1:\n            logger.debug(",
      U + "test_offsets.py"),
    m("puller-idle-commit-while-cached", PL, "an idle pull commits its next offset while messages are cached",
      "    if req.pq.msg_count == 0:\n        engine.offset_store.update(req.mq, req.next_offset, True)",
      "    if True:\n        engine.offset_store.update(req.mq, req.next_offset, True)",
      SLOW),
    m("pq-orderly-commit-min", PQ, "orderly commit() returns the lowest taken offset + 1, not the highest",
      "        last = max(taken)\n", "        last = min(taken)\n",
      U + "test_process_queue.py"),
    # ---------------------------------------------------------------- retry chain / never dropped
    m("cc-send-back-failure-dropped", CC, "a message whose send-back and re-publish both failed counts as done",
      "                    if ok:\n                        done.append(entry.offset)",
      "                    if True:\n                        done.append(entry.offset)",
      CHAIN + "::test_send_back_and_republish_refused_the_message_is_retried_locally"),
    m("retry-no-republish", RT, "send-back failure: no re-publish to %RETRY%, reported as done",
      "        return await self.republish(msg, max_reconsume_times, msg.reconsume_times + 1)",
      "        return True",
      CHAIN + "::test_send_back_refused_the_message_is_republished_to_the_retry_topic"),
    m("retry-republish-failure-true", RP, "a failed re-publish reports success (message dropped)",
      "                         msg.msg_id, topic, exc)\n            return False",
      "                         msg.msg_id, topic, exc)\n            return True",
      CHAIN + "::test_send_back_and_republish_refused_the_message_is_retried_locally"),
    m("retry-republish-loses-topic", RP, "the re-published copy does not carry its real topic",
      "    props[codec.PROPERTY_RETRY_TOPIC] = msg.topic\n", "",
      CHAIN + "::test_send_back_refused_the_message_is_republished_to_the_retry_topic"),
    m("retry-local-count-not-raised", CC, "a locally retried message keeps its reconsume count",
      "entry.payload = with_reconsume_times(entry.payload, reconsume_times(entry.payload) + 1)",
      "entry.payload = with_reconsume_times(entry.payload, reconsume_times(entry.payload))",
      CHAIN + "::test_send_back_and_republish_refused_the_message_is_retried_locally"),
    m("retry-delay-level-ignored", RT, "the handler's delay level is not sent with the send-back",
      "delay_level=delay_level,", "delay_level=0,",
      CHAIN + "::test_reconsume_later_delay_level_n_comes_back_after_level_n"),
    m("worker-delay-level-dropped", "rmqrun/worker/main.py", "ReconsumeLater(delay_level=n) loses n in the worker",
      "delays[acked:end] = [c.delay_level] * (end - acked)", "delays[acked:end] = [0] * (end - acked)",
      CHAIN + "::test_reconsume_later_delay_level_n_comes_back_after_level_n"),
    m("cc-not-run-counted-done", CC, "NOT_RUN messages (worker died, time limit) count as consumed",
      "            elif verdict is Verdict.NOT_RUN:\n                redo.append(entry)",
      "            elif verdict is Verdict.NOT_RUN:\n                done.append(entry.offset)",
      I + "test_engine_not_run.py"),
    m("worker-ack-index-all", "rmqrun/worker/handler.py", "AckIndex(n) acknowledges the whole call",
      "return ConcurrentOutcome(min(value.index + 1, count), value.delay_level)",
      "return ConcurrentOutcome(count, value.delay_level)",
      U + "test_handler_results.py"),
    # ---------------------------------------------------------------- DLQ threshold
    m("broker-dlq-threshold-send-back", "rmqrun/broker/processors/send.py",
      "CONSUMER_SEND_MSG_BACK dead-letters one retry late",
      "if original.reconsume_times >= max_times or delay_level < 0:",
      "if original.reconsume_times > max_times or delay_level < 0:",
      I + "test_broker_retry.py::test_dlq_once_max_reconsume_times_is_used_up"),
    m("broker-dlq-threshold-retry-send", "rmqrun/broker/processors/send.py",
      "a send to %RETRY% past max reconsume times is not dead-lettered",
      "            if reconsume_times >= max_times:\n                topic = dlq_topic(group)",
      "            if reconsume_times > max_times:\n                topic = dlq_topic(group)",
      I + "test_broker_retry.py::test_retry_topic_send_past_max_goes_to_the_dlq"),
    m("broker-delay-level-not-growing", "rmqrun/broker/processors/send.py",
      "send-back delay level does not grow with the reconsume count",
      "                delay_level = 3 + original.reconsume_times", "                delay_level = 3",
      CHAIN + "::test_default_retry_delay_grows_with_the_reconsume_count"),
    m("orderly-dlq-threshold", CO, "orderly dead-letters one retry late",
      "if all(reconsume_times(e.payload) >= limit for e in call) and cfg.clustering:",
      "if all(reconsume_times(e.payload) > limit for e in call) and cfg.clustering:",
      ORD + "::test_orderly_dead_letters_after_max_reconsume_times"),
    m("broker-schedule-no-delay", "rmqrun/broker/schedule.py", "delayed messages are delivered at once",
      "due = stored.store_timestamp + delay_ms", "due = stored.store_timestamp",
      I + "test_broker_retry.py::test_delayed_message_is_delivered_to_its_topic_when_due"),
    # ---------------------------------------------------------------- orderly: locks, suspend, rollback
    m("orderly-no-lock-check", CO, "the 'still locked?' check before an orderly job is handed to a worker is skipped",
      "if cfg.clustering and (not pq.locked or pq.is_lock_expired()):",
      "if False:",
      ORDX),
    m("orderly-lock-expiry-ignored", PQ, "an expired orderly lock is never seen as expired",
      "return _now(now_ms) - self.last_lock_timestamp > self.lock_max_live_ms", "return False",
      U + "test_process_queue.py", ORDX),
    m("lock-loss-unnoticed", RB, "lock renewal does not notice a lost broker lock",
      "                elif req.pq.locked:\n", "                elif False:\n",
      ORDX),
    m("orderly-cancel-no-rollback", CO, "a cancelled orderly job keeps its messages taken (no rollback)",
      "        except asyncio.CancelledError:\n            pq.rollback()\n", "        except asyncio.CancelledError:\n",
      ORDX),
    m("orderly-not-run-kept-taken", CO, "an orderly job that could not run keeps its messages taken",
      "            pq.make_messages_to_consume_again([e.offset for e in entries])\n            return d.SUSPEND",
      "            return d.SUSPEND",
      ORDX),
    m("orderly-suspend-not-put-back", CO, "a suspended orderly call's messages are not put back first in line",
      "            pq.make_messages_to_consume_again([e.offset for e in rest])\n            if first_bad:",
      "            if first_bad:",
      ORD + "::test_orderly_suspend_redelivers_same_message_first"),
    m("pq-rollback-lost", PQ, "rollback() forgets the taken messages instead of putting them back",
      "        for offset in sorted(taken, reverse=True):\n            tree.add(taken[offset])\n",
      "        for offset in sorted(taken, reverse=True):\n            pass\n",
      U + "test_process_queue.py"),
    m("puller-orderly-pulls-unlocked", PL, "an orderly queue is pulled without its lock",
      "            if not pq.locked:\n                await asyncio.sleep(exception_delay)",
      "            if False:\n                await asyncio.sleep(exception_delay)",
      ORDX),
    m("rebalance-takes-unlocked", RB, "rebalance takes an orderly queue it could not lock",
      "if self.orderly_locks and not await self.lock(mq):", "if False:",
      ORDX),
    # ---------------------------------------------------------------- manual commit
    m("manual-commit-acts-auto", CO, "auto_commit: false commits every SUCCESS like auto-commit",
      "        if cfg.auto_commit:\n            # Java: with auto-commit", "        if True:\n            # Java: with auto-commit",
      I + "test_engine_manual_commit.py"),
    m("manual-rollback-partial", CO, "ROLLBACK puts back only the failing call, not everything since the last commit",
      "            if bad is Verdict.ROLLBACK:\n                pq.rollback()",
      "            if bad is Verdict.ROLLBACK:\n                pq.make_messages_to_consume_again([e.offset for e in rest])",
      I + "test_engine_manual_commit.py"),
    m("manual-commit-ignored", CO, "COMMIT in manual mode commits nothing",
      "                pq.make_messages_to_consume_again([e.offset for e in tail])\n                commit_offset = pq.commit()",
      "                pq.make_messages_to_consume_again([e.offset for e in tail])\n                commit_offset = -1",
      I + "test_engine_manual_commit.py"),
    # ---------------------------------------------------------------- flow control
    m("flow-count-unbounded", PL, "no flow control on cached message count / size",
      "if pq.msg_count > limit_count or _mib(pq.msg_size) > limit_mib:", "if False:",
      I + "test_engine_flow.py::test_cached_message_count_bounds_the_pulls"),
    m("flow-span-unbounded", PL, "no flow control on the cached offset span",
      "if pq.max_span() > cfg.consume_concurrently_max_span:", "if False:",
      I + "test_engine_flow.py::test_offset_span_bounds_the_pulls"),
    m("dispatch-no-inflight-bound", "rmqrun/supervisor/dispatch.py", "a worker's messages in flight are unbounded",
      "        if load + size > self.max_inflight_messages:\n            return False",
      "        if False:\n            return False",
      U + "test_dispatch.py"),
    m("dispatch-orderly-two-in-flight", "rmqrun/supervisor/dispatch.py", "two batches of one orderly queue in flight",
      "            if queue_key in self._busy_queues:\n                return None",
      "            if False:\n                return None",
      U + "test_dispatch.py"),
    # ---------------------------------------------------------------- puller error paths
    m("puller-offset-illegal-not-corrected", PL, "OFFSET_ILLEGAL keeps the illegal offset instead of the broker's",
      "        req.next_offset = result.next_begin_offset\n        pq.dropped = True",
      "        pq.dropped = True",
      I + "test_engine_puller_errors.py::test_offset_illegal_drops_the_queue_until_the_offset_is_corrected"),
    m("puller-gives-up-on-error", PL, "a pull that fails (broker error, connection) ends the queue's pull loop",
      "            logger.warning(\"pull {} from offset {} failed: {}\", mq, req.next_offset, exc)\n"
      "            await asyncio.sleep(exception_delay)",
      "            logger.warning(\"pull {} from offset {} failed: {}\", mq, req.next_offset, exc)\n"
      "            return",
      I + "test_engine_puller_errors.py::test_refused_pulls_are_retried_and_nothing_is_lost"),
    m("puller-tag-refilter", PL, "no client-side tag re-filter (tags whose hash codes collide get through)",
      "        return True\n    return sub.matches_tag(tags)", "        return True\n    return True",
      I + "test_engine_puller_errors.py::test_tags_with_colliding_hash_codes_are_filtered_by_the_client"),
    # ---------------------------------------------------------------- tag filtering
    m("sub-tag-match-all", "rmqrun/client/subscription.py", "client tag filter accepts any tag",
      "return tags is not None and tags in self._tags_lookup", "return True",
      U + "test_subscription.py"),
    m("sub-tags-code-all", "rmqrun/client/subscription.py", "broker tags-code filter accepts any code",
      "return tags_code in self._codes_lookup", "return True",
      U + "test_subscription.py"),
    m("broker-pull-no-filter", "rmqrun/broker/processors/pull.py", "the broker does not filter pulls by tag",
      "accept = None if sub.is_sub_all or sub.class_filter_mode else sub.matches_tags_code", "accept = None",
      I + "test_broker_send_pull.py"),
    # ---------------------------------------------------------------- rebalance allocation
    m("alloc-average-extra", "rmqrun/consumer/allocate.py", "AVG gives the extra queue to one consumer too many",
      "    elif mod > 0 and index < mod:\n", "    elif mod > 0 and index <= mod:\n",
      U + "test_allocate.py"),
    m("alloc-circle-stride", "rmqrun/consumer/allocate.py", "AVG_BY_CIRCLE strides by the queue count",
      "return mqs[index :: len(cids)]", "return mqs[index :: len(mqs)]",
      U + "test_allocate.py"),
    # ---------------------------------------------------------------- crash re-dispatch / dropped queues
    m("exec-lost-batch-succeeds", "rmqrun/supervisor/executor.py",
      "a batch queued in a dead worker's pipe counts as consumed instead of running again",
      "            again.append(pending)\n",
      "            pending.future.set_result(JobResult([Verdict.SUCCESS] * batch.count, [0] * batch.count))\n",
      I + "test_executor_worker_lost.py"),
    m("cc-dropped-result-applied", CC, "the result of a job whose queue was dropped meanwhile is applied",
      "        if pq.dropped:\n            ran = len(", "        if False:\n            ran = len(",
      I + "test_engine_dropped.py"),
    # ---------------------------------------------------------------- store: fsync-before-answer, recovery
    m("store-answer-before-fsync", "rmqrun/broker/store/message_store.py", "a SYNC put returns before its fsync",
      "            await self.flush_to(result.end_offset)\n        return result", "            pass\n        return result",
      U + "test_store_flush.py"),
    m("store-not-fenced", "rmqrun/broker/store/message_store.py", "a store whose fsync failed still accepts writes",
      "        if failed is not None:\n            raise StoreIOError(f\"store is fenced",
      "        if False:\n            raise StoreIOError(f\"store is fenced",
      U + "test_store_flush.py"),
    m("scan-no-body-crc", "rmqrun/broker/store/log_scanner.py",
      "recovery keeps an unsealed (pre-checksum) record whose body CRC is wrong",
      "if verify and not is_sealed(header.physical_offset) and not check_body_crc(buf, off, header):", "if False:",
      U + "test_store_checksum.py::test_an_unsealed_torn_tail_is_still_cut_the_old_way"),
    m("scan-no-physical-offset", "rmqrun/broker/store/record.py",
      "an unsealed record naming another PHYSICALOFFSET passes the store's checks",
      "    if (tag << 32) | crc != pos:\n", "    if False:\n",
      U + "test_store_recovery_position.py"),
    m("scan-blank-marker-unchecked", "rmqrun/broker/store/log_scanner.py",
      "an end-of-segment marker claiming the wrong length is trusted",
      "if blank != seg_end - pos:", "if False:",
      U + "test_store_recovery.py"),
    m("recovery-checkpoint-record-unchecked", "rmqrun/broker/store/recovery.py",
      "the checkpoint's last record is trusted without its position and CRC checks",
      "        if problem or (not is_sealed(hdr.physical_offset) and not check_body_crc(data, 0, hdr)):", "        if False:",
      U + "test_store_recovery_position.py"),
    m("recovery-checkpoint-end-unchecked", "rmqrun/broker/store/recovery.py",
      "a checkpoint that does not end at its last record is trusted",
      "        if rec_end == c_off:\n            return None", "        if True:\n            return None",
      U + "test_store_recovery_position.py"),
    # ---------------------------------------------------------------- store: record checksum (seal)
    m("store-no-seal", "rmqrun/broker/store/commit_log.py", "records are written without their record CRC seal",
      "            seal(rec, pos)\n", "            pass\n",
      U + "test_store_checksum.py"),
    m("scan-no-record-crc", "rmqrun/broker/store/log_scanner.py", "recovery does not check the record CRC of sealed records",
      "check_crc=verify)", "check_crc=False)",
      U + "test_store_checksum.py"),
    m("read-no-record-crc", "rmqrun/broker/store/record.py", "a sealed record corrupted after recovery is served",
      "ok = _crc32(rec) == crc", "ok = True",
      U + "test_store_checksum.py::test_a_record_corrupted_after_recovery_is_never_served"),
    m("recovery-checkpoint-seal-unchecked", "rmqrun/broker/store/recovery.py",
      "the checkpoint's last record is trusted without its record CRC",
      "problem = stored_problem(data, 0, hdr.total_size, last)", "problem = None",
      U + "test_store_checksum.py::test_a_checkpoint_whose_last_record_is_torn_is_not_trusted"),
    m("read-at-unchecked", "rmqrun/broker/store/commit_log.py", "a single-record read serves a record that fails its checks",
      "if hdr.total_size != size or stored_problem(data, 0, size, pos) is not None:", "if hdr.total_size != size:",
      U + "test_store_checksum.py::test_a_record_corrupted_after_recovery_is_never_served"),
    # ---------------------------------------------------------------- broker: answers when the store fails
    m("broker-sync-send-before-fsync", "rmqrun/broker/broker.py", "a SYNC-flush send is answered before its fsync",
      "        if self.config.flush_mode is FlushMode.SYNC:\n            try:",
      "        if False:\n            try:",
      I + "test_broker_store_failures.py::test_a_sync_flush_send_is_answered_only_after_its_fsync"),
    m("flusher-wakes-unsynced", "rmqrun/broker/store/flusher.py",
      "a send written during an fsync is woken by that fsync (before its own bytes are on disk)",
      "ready = [w for w in self._waiters if w.offset <= synced]", "ready = list(self._waiters)",
      I + "test_broker_store_failures.py::test_a_send_written_during_an_fsync_waits_for_the_next_one"),
    m("broker-flush-timeout-is-ok", "rmqrun/broker/processors/send.py",
      "a send whose fsync timed out is answered SUCCESS, not FLUSH_DISK_TIMEOUT",
      "return self._ok(cmd, stored, queue_id, ResponseCode.FLUSH_DISK_TIMEOUT)", "return self._ok(cmd, stored, queue_id)",
      I + "test_broker_store_failures.py::test_flush_timeout_answers_flush_disk_timeout_with_the_stored_position"),
    m("broker-too-large-not-illegal", "rmqrun/broker/processors/send.py",
      "a record over max_message_size is not answered MESSAGE_ILLEGAL",
      "(MessageTooLargeError, ProtocolError)", "ProtocolError",
      I + "test_broker_store_failures.py::test_a_record_over_max_message_size_is_message_illegal_and_not_stored"),
    m("broker-pull-consume-disabled-served", "rmqrun/broker/processors/pull.py",
      "a group with consume_enable off is still served pulls",
      "if not sgc.consume_enable:", "if False:",
      I + "test_broker_store_failures.py::test_pull_refusals_name_the_problem"),
    m("broker-pull-unreadable-served", "rmqrun/broker/processors/pull.py",
      "a topic without read permission is still served pulls",
      "if not is_readable(tc.perm):", "if False:",
      I + "test_broker_store_failures.py::test_pull_refusals_name_the_problem"),
    m("schedule-progress-not-restored", "rmqrun/broker/schedule.py",
      "delay-queue progress is not restored after a restart (delivered twice)",
      "self.offsets[level] = min(max(offset, lo), hi)", "pass",
      I + "test_broker_store_failures.py::test_delay_queue_progress_is_restored_after_a_restart"),
    m("longpoll-held-after-close", "rmqrun/broker/broker.py", "a closed connection's held pulls are kept",
      "self.hold.connection_closed(conn)", "pass",
      I + "test_broker_longpoll.py::test_closing_the_connection_forgets_its_held_pulls"),
    # ---------------------------------------------------------------- broker: long polling woken by every append
    m("longpoll-no-wake-batch", "rmqrun/broker/broker.py", "a batch send does not wake the pulls held on its queue",
      "        return (await self.put_messages([msg]))[0]\n"
      + _PUT_MESSAGES_HEAD
      + "        for result, code in zip(results, codes):\n",
      "        stored = (await self.put_messages([msg]))[0]\n"
      "        self.hold.notify_arrival(stored.topic, stored.queue_id, stored.result.queue_offset + 1, msg.tags_code)\n"
      "        return stored\n"
      + _PUT_MESSAGES_HEAD
      + "        for result, code in ():  # only put_message (one message) wakes\n",
      I + "test_broker_longpoll_paths.py::test_a_held_pull_is_woken_by_every_append_path[batch_send]"),
    m("longpoll-no-wake-schedule-due", "rmqrun/broker/broker.py",
      "a delayed message coming due does not wake the pulls held on its real queue",
      "        for result, code in zip(results, codes):\n",
      "        for result, code in zip(results, codes) if msgs[0].properties.get(\"REAL_TOPIC\") is None else ():\n",
      I + "test_broker_longpoll_paths.py::test_a_held_pull_is_woken_by_every_append_path[delayed_send]"),
    m("longpoll-no-wake-send-back", "rmqrun/broker/broker.py",
      "a send-back (%RETRY% / %DLQ%) does not wake the pulls held on its queue",
      "            self.hold.notify_arrival(topic, queue_id, result.queue_offset + 1, code)\n",
      "            if not topic.startswith(\"%\"):\n"
      "                self.hold.notify_arrival(topic, queue_id, result.queue_offset + 1, code)\n",
      I + "test_broker_longpoll_paths.py::test_a_held_pull_is_woken_by_every_append_path[send_back_to_dlq]"),
    # ---------------------------------------------------------------- crash isolation
    m("isolate-reruns-finished", "rmqrun/supervisor/executor.py",
      "after a worker death the messages it had finished are run again",
      "        verdicts: list[Verdict] = [_VERDICTS[b] for b in prog.statuses] if prog is not None else []\n"
      "        delays = list(prog.delay_levels) if prog is not None else []\n",
      "        verdicts: list[Verdict] = []\n        delays: list[int] = []\n",
      I + "test_faults_crash.py::test_a_message_that_kills_its_worker_goes_to_the_dlq_alone[exit7]"),
    m("isolate-not-split", "rmqrun/supervisor/executor.py",
      "the unfinished rest of a batch whose worker died is re-run whole, not one message per batch",
      "                if self._closed is None and batch.count > 1:\n", "                if False:\n",
      I + "test_signals_workers.py::test_a_handler_that_kills_its_worker_on_every_message_does_not_stop_rmqrun"),
    m("poison-not-failed-alone", "rmqrun/supervisor/executor.py",
      "a one-message batch whose worker died in the handler call is re-run, not failed",
      "if batch.count == 1 and (lost.in_call or pending.deaths >= POISON_DEATHS):", "if False:",
      I + "test_signals_workers.py::test_a_handler_that_kills_its_worker_on_every_message_does_not_stop_rmqrun"),
    m("poison-not-counted", "rmqrun/supervisor/executor.py",
      "a poison message is put back NOT_RUN (no reconsume counted, never dead-lettered)",
      "verdict = Verdict.SUSPEND if batch.mode is ConsumeMode.ORDERLY else Verdict.RECONSUME_LATER",
      "verdict = Verdict.NOT_RUN",
      I + "test_signals_workers.py::test_a_handler_that_kills_its_worker_on_every_message_does_not_stop_rmqrun"),
    m("pool-exit3-is-boot-failure", "rmqrun/supervisor/pool.py",
      "exit 3 of a ready worker (the handler's sys.exit) is taken for a boot failure: the pool gives up",
      "        if not was_ready and proc.boot_code == ExitCode.BOOT_ERROR:\n            self._fail(",
      "        if code == ExitCode.BOOT_ERROR or proc.boot_code == ExitCode.BOOT_ERROR:\n            self._fail(",
      I + "test_pool_faults.py::test_exit_3_from_a_ready_worker_is_a_crash_not_a_boot_failure"),
    m("pool-crash-guard-counts-calls", "rmqrun/supervisor/pool.py",
      "a death inside a handler call counts against the crash-loop guard",
      "if proc.kill_reason != _KILL_TIME_LIMIT and not explained:", "if proc.kill_reason != _KILL_TIME_LIMIT:",
      I + "test_pool_faults.py::test_a_death_mid_batch_reports_the_finished_results_and_the_call"),
    # ---------------------------------------------------------------- dropped queues, RSS, graceful stop
    m("exec-dropped-waiting-runs", "rmqrun/supervisor/executor.py",
      "a job waiting in the executor runs although its queue was dropped",
      "            if pending.dropped():  # rebalanced away", "            if False:  # rebalanced away",
      I + "test_executor_dropped.py::test_a_job_waiting_in_the_executor_is_not_run_once_its_queue_is_dropped"),
    m("exec-dropped-piped-runs", "rmqrun/supervisor/executor.py",
      "a job waiting in a worker's pipe runs although its queue was dropped (no skip asked)",
      "            if pending.dropped():\n                self.pool.skip(batch_id)",
      "            if pending.dropped():\n                pass",
      I + "test_executor_dropped.py::test_a_job_waiting_in_a_workers_pipe_is_skipped_once_its_queue_is_dropped"),
    m("canary-worker-skip-ignored", "rmqrun/worker/main.py",
      "a worker runs a piped batch the supervisor asked it to skip (runs only in worker processes)",
      "if prog is not None and prog.skipped(run.batch_id):", "if False:",
      I + "test_pool_faults.py::test_a_batch_waiting_in_a_workers_pipe_is_skipped_when_asked"),
    m("canary-worker-rss-between-jobs", "rmqrun/worker/main.py",
      "RSS is checked only between jobs, not between the handler calls of one batch",
      "if check_memory and start and self._memory_check():", "if False:",
      I + "test_faults_limits.py::test_rss_limit_holds_within_one_handler_call"),
    m("pool-stop-cut-short-uncounted", "rmqrun/supervisor/pool.py",
      "a graceful stop does not count the batches it cut short",
      "            if self._state == \"stopping\" and Status.NOT_RUN in frame.statuses:\n                self.cut_short.append(batch)",
      "            if False:\n                self.cut_short.append(batch)",
      I + "test_faults_limits.py::test_graceful_stop_keeps_to_graceful_timeout_and_counts_the_jobs_it_cut_short"),
    # ---------------------------------------------------------------- undecodable bodies, LZ4/ZSTD
    m("canary-worker-undecodable-handled", "rmqrun/worker/main.py",
      "an undecodable record is handed to the handler instead of being reported UNDECODABLE",
      "if any_bad and decode_errors[start]:", "if False:",
      I + "test_compressed_bodies_run.py::test_an_undecodable_body_goes_to_the_dlq_as_stored_and_the_queue_moves_on"),
    m("undecodable-sent-back-with-delay", RT,
      "an undecodable record is sent back with a delay level (retried) instead of -1 (straight to the DLQ)",
      "return await self._send_msg_back(ids, msg_id, origin_topic, broker_name, -1, max_reconsume_times)",
      "return await self._send_msg_back(ids, msg_id, origin_topic, broker_name, 0, max_reconsume_times)",
      I + "test_compressed_bodies_run.py::test_an_undecodable_body_goes_to_the_dlq_as_stored_and_the_queue_moves_on"),
    m("codec-lz4-zstd-swapped", "rmqrun/remoting/message.py", "the LZ4 and ZSTD compression-type bits are swapped",
      "{0: \"ZLIB\", 1: \"LZ4\", 2: \"ZSTD\", 3: \"ZLIB\"}", "{0: \"ZLIB\", 1: \"ZSTD\", 2: \"LZ4\", 3: \"ZLIB\"}",
      U + "test_compressed_bodies.py"),
    # ---------------------------------------------------------------- start-up: waiting for the cluster
    m("cluster-wait-ready-early", "rmqrun/supervisor/cluster_wait.py",
      "a start that failed (no cluster yet) is taken as started: READY=1 before the first rebalance",
      "        except RETRYABLE as exc:\n            await _discard(engine)\n",
      "        except RETRYABLE as exc:\n            return engine\n",
      I + "test_start_waits_for_cluster.py::test_run_started_before_the_broker_waits_and_then_handles_everything"),
]
