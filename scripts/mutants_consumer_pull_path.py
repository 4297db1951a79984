"""Mutants of the supervisor's pull path cut in issue #38 (branch ``supcut2``): the one-pass scan of a pull
(``scan_columns``), the store times it hands the statistics and the pipe's DONE decode; and the hand-over after
the next request is written (``pullfirst``, ``popfirst``) (entries as in
:mod:`mutant_kit`; joined by :mod:`mutants_table`). Kept apart from :mod:`mutants_consumer` so each table stays
under the 600-line limit.
"""

from __future__ import annotations

from mutant_kit import U, Mutant, m

MUTANTS: list[Mutant] = [
    # ---------------------------------------------------------------- the supervisor's pull path (#38, supcut2)
    m("sup2-scan-v6-stamp-misread", "rmqrun/remoting/message.py",
      "the one-pass scan reads an IPv6 born host's store time where an IPv4 one's sits: the wait histogram "
      "counts garbage for those records",
      "                p = pos + store_timestamp_pos(sys_flag)\n                (stamp,) = unpack_long(body, p)",
      "                p = pos + store_timestamp_pos(0)\n                (stamp,) = unpack_long(body, p)\n"
      "                p = pos + store_timestamp_pos(sys_flag)",
      U + "remoting/test_scan_columns.py"),
    m("sup2-scan-props-unchecked", "rmqrun/remoting/message.py",
      "the one-pass scan no longer checks that a record's fields add up to its total size: a damaged pull is "
      "cached as messages instead of refused",
      "            if props_len < 0 or p + 2 + props_len != end:",
      "            if props_len < 0:",
      U + "remoting/test_scan_columns.py"),
    m("sup2-cc-stats-wrong-column", "rmqrun/consumer/consume_concurrently.py",
      "a concurrent whole-pull job hands the statistics its body sizes as store times",
      "        stored = entries.stamps if isinstance(entries, QueuedRun) else None",
      "        stored = entries.sizes if isinstance(entries, QueuedRun) else None",
      U + "consumer/test_pull_store_times.py"),
    m("sup2-orderly-stats-wrong-column", "rmqrun/consumer/consume_orderly.py",
      "an orderly whole-pull job hands the statistics its body sizes as store times",
      "                                 taken.stamps if isinstance(taken, QueuedRun) else None)",
      "                                 taken.sizes if isinstance(taken, QueuedRun) else None)",
      U + "consumer/test_pull_store_times.py"),
    m("sup2-done-offsets-as-delays", "rmqrun/pipe/wire.py",
      "a DONE frame's queue offsets are read with the delay levels' width",
      "    return struct.Struct(f\">{n}h\").unpack_from, struct.Struct(f\">{n}q\").unpack_from",
      "    return struct.Struct(f\">{n}h\").unpack_from, struct.Struct(f\">{n}h\").unpack_from",
      U + "pipe"),
    # ---------------------------------------------------------------- orderly jobs settled in callbacks (#38, ordset)
    m("ordset-kick-ignores-lock", "rmqrun/consumer/consume_orderly.py",
      "a pull that comes to an idle orderly queue hands its job over without a fresh, continuous lock",
      "self.stopping or q.lock_in_doubt():\n            self._spawn(q, False)",
      "self.stopping:\n            self._spawn(q, False)",
      U + "consumer/test_consume_orderly.py::test_a_queue_whose_lock_is_not_granted_runs_nothing"),
    m("ordset-callback-ignores-lock", "rmqrun/consumer/consume_orderly.py",
      "a job settled in its done callback hands the next one over although the queue's lock expired meanwhile",
      "                        if q.lock_in_doubt():",
      "                        if False:",
      U + "consumer/test_consume_orderly.py::test_a_lock_that_expires_while_a_job_runs_hands_nothing_more_over_"
      "and_asks_for_it"),
    m("ordset-callback-commits-failures", "rmqrun/consumer/consume_orderly.py",
      "the done callback settles a job that did not succeed in full as a success (commits past a SUSPEND)",
      "                    if not _succeeded(head.job, result):", "                    if False:",
      U + "consumer/test_consume_orderly.py::test_suspend_puts_the_call_back_first_in_line_counted_once_more"),
    m("ordset-manual-commit-by-callback", "rmqrun/consumer/consume_orderly.py",
      "manual commit's results are settled by the auto-commit callback: a SUCCESS commits without COMMIT",
      "        if not q.fast or pq.dropped", "        if pq.dropped",
      U + "consumer/test_consume_orderly.py::test_manual_commit_a_first_job_of_successes_commits_nothing_until_a_"
      "commit"),
    m("ordset-callback-dropped-no-idle", "rmqrun/consumer/consume_orderly.py",
      "a dropped queue whose last job settles in its callback is never reported idle (its removal waits)",
      "                        if pq.dropped or self.stopping:\n                            return self._idle(q)",
      "                        if False:\n                            return self._idle(q)",
      U + "consumer/test_consume_orderly.py::test_a_dropped_queue_is_busy_until_its_job_ends_then_reported_idle"),
    m("ordset-stop-leaves-callback-queues", "rmqrun/consumer/consume_orderly.py",
      "stop neither waits for the jobs that callbacks would settle nor cancels them and puts their messages back",
      "            if q.task is None:  # settled by callbacks so far: a task waits for its jobs, and is cancelled\n"
      "                self._spawn(q, True)",
      "            if q.task is None:  # settled by callbacks so far: a task waits for its jobs, and is cancelled\n"
      "                pass",
      U + "consumer/test_consume_orderly.py::test_stop_waits_for_the_job_in_flight_and_hands_nothing_more_over",
      U + "consumer/test_consume_orderly.py::test_stop_past_its_grace_cancels_the_job_and_puts_its_messages_back"),
    m("ordset-callback-drops-lost-job", "rmqrun/consumer/consume_orderly.py",
      "a job the executor could not run (its future ended in an error) makes the done callback end the queue on an "
      "'unexpected error' instead of handing it to the task: its messages are never handed over again",
      "                    if future.cancelled() or future.exception() is not None:",
      "                    if future.cancelled():",
      U + "consumer/test_consume_orderly.py::test_a_job_the_executor_could_not_run_is_handed_over_again_first_and_"
      "then_committed"),
    # --- pullfirst (issue #38): a pull's run handed over after the next pulls are written
    m("pullfirst-hand-over-at-once", "rmqrun/consumer/puller.py",
      "a whole pull's messages are handed over before the queue's next pull is sent (the broker idles meanwhile)",
      "            call_after_writes(_hand_over, submit_run, req, run)",
      "            _hand_over(submit_run, req, run)",
      U + "consumer/test_pull_first.py"),
    m("pullfirst-failure-unlogged", "rmqrun/consumer/puller.py",
      "a hand-over that raises is dropped without a word",
      '        logger.opt(exception=exc).error("handing the messages pulled from {}',
      '        logger.opt(exception=exc).debug("handing the messages pulled from {}',
      U + "consumer/test_pull_first.py"),
    m("pullfirst-stop-waits-one-step", "rmqrun/aio.py",
      "a stop waits one loop step for the last hand-overs: a run read as its pull task ended reaches a stopped service",
      "    for _ in range(2):\n        await asyncio.sleep(0)", "    for _ in range(1):\n        await asyncio.sleep(0)",
      U + "consumer/test_pull_first.py"),
    m("pullfirst-stop-skips-the-wait", "rmqrun/consumer/push.py",
      "the engine's stop no longer waits for the last hand-overs: a pull's run read as its task ended reaches a "
      "stopped service (its messages come back only after a restart)",
      "        await after_writes_done()  # what the pulls brought last",
      "        pass  # what the pulls brought last",
      U + "consumer/test_pull_first.py"),
    m("popfirst-flush-one-step", "rmqrun/consumer/pop_consume.py",
      "a lane's popped messages are handed over a step after they came, before the pops of that turn are written",
      "            call_after_writes(self._flush_due)",
      "            asyncio.get_running_loop().call_soon(self._flush_due)",
      U + "consumer/test_pop_mixed_queue_jobs.py"),
    m("popfirst-due-flush-once", "rmqrun/consumer/pop_consume.py",
      "the lanes' delayed flush runs once and is never scheduled again: later pops' messages wait in their lanes",
      "    def _flush_due(self) -> None:\n        self._due_scheduled = False\n",
      "    def _flush_due(self) -> None:\n        pass\n",
      U + "consumer/test_pop_mixed_queue_jobs.py"),
]
