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
      "return self.queue_offset_max + 1 if first is None else first",
      "return self.queue_offset_max + 1",
      U + "test_process_queue.py", SLOW),
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
      "kept = [h for h in heads if sub.matches_tag(h.properties.get(PROPERTY_TAGS))]", "kept = heads",
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
    m("exec-lost-batch-succeeds", "rmqrun/supervisor/executor.py", "a batch lost with its worker counts as consumed",
      "            again.append(pending)\n",
      "            pending.future.set_result(JobResult([Verdict.SUCCESS] * batch.count, [0] * batch.count))\n",
      I + "test_signals_workers.py::test_sigkill_of_a_busy_worker_loses_nothing_concurrent"),
    m("cc-dropped-result-applied", CC, "the result of a job whose queue was dropped meanwhile is applied",
      "        if pq.dropped:\n            logger.warning(\"{} was dropped while",
      "        if False:\n            logger.warning(\"{} was dropped while",
      I + "test_engine_dropped.py"),
    # ---------------------------------------------------------------- store: fsync-before-answer, recovery
    m("store-answer-before-fsync", "rmqrun/broker/store/message_store.py", "a SYNC put returns before its fsync",
      "            await self.flush_to(result.end_offset)\n        return result", "            pass\n        return result",
      U + "test_store_flush.py"),
    m("store-not-fenced", "rmqrun/broker/store/message_store.py", "a store whose fsync failed still accepts writes",
      "        if failed is not None:\n            raise StoreIOError(f\"store is fenced",
      "        if False:\n            raise StoreIOError(f\"store is fenced",
      U + "test_store_flush.py"),
    m("scan-no-body-crc", "rmqrun/broker/store/log_scanner.py", "recovery keeps records whose body CRC is wrong",
      "if pos >= self.verify_from and not check_body_crc(buf, off, header):", "if False:",
      U + "test_store_recovery.py", U + "test_store_recovery_fuzz.py"),
    m("scan-no-physical-offset", "rmqrun/broker/store/log_scanner.py", "recovery keeps a record at the wrong position",
      "if header.physical_offset != pos:", "if False:",
      U + "test_store_recovery_position.py"),
    m("scan-blank-marker-unchecked", "rmqrun/broker/store/log_scanner.py",
      "an end-of-segment marker claiming the wrong length is trusted",
      "if blank != seg_end - pos:", "if False:",
      U + "test_store_recovery.py"),
    m("recovery-checkpoint-record-unchecked", "rmqrun/broker/store/recovery.py",
      "the checkpoint's last record is trusted without its position and CRC checks",
      "if hdr.physical_offset != last or not check_body_crc(data, 0, hdr):", "if False:",
      U + "test_store_recovery_position.py"),
    m("recovery-checkpoint-end-unchecked", "rmqrun/broker/store/recovery.py",
      "a checkpoint that does not end at its last record is trusted",
      "        if rec_end == c_off:\n            return None", "        if True:\n            return None",
      U + "test_store_recovery_position.py"),
]
