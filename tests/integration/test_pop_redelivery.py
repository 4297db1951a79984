"""Redelivery after a kill, with its deadline: what a ``kill -9``'d POP instance had popped and not acked comes back
to another instance within the invisible time + 5 s of its pop (issue #32).

Real ``rmqrun run --consume-mode pop`` processes against the embedded broker (its thread in this process). The
broker side is observed, not changed: every checkpoint the revive service revives is recorded with its pop time
and invisible time (the one in force: a long call's extension replaces its message's checkpoint), and the
message's ``idx``. The second instance's handler records when each call began (same host, same clock). The
bound is the broker's revive guarantee (its pass sleeps until the earliest checkpoint is due) plus the second
instance's long poll being woken by the revived message, so every deadline is derived from the broker's own
pop time of that message, never from when the test looked.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Any

from rmqrun.broker.app import EmbeddedBroker
from rmqrun.broker.messages import read_stored
from rmqrun.broker.store import GetMessageStatus
from tests.integration.pop_run_kit import deliveries_by_idx, set_pop_mode
from tests.integration.handlers.pop_time_handler import read_times
from tests.integration.signals_kit import Runs, produce, read_deliveries, start_broker, wait_until

#: the invisible time of both instances (ms): small, so the test is short; the client allows 5 s at least
INVISIBLE_MS = 6000
#: what the guarantee allows past the invisible time (issue #32: "within the invisible time + 5 s")
SLACK_MS = 5000


def watch_revives(eb: EmbeddedBroker) -> list[tuple[int, int, int]]:
    """(idx, pop time, invisible time) of every message the broker revives from now on (its checkpoint's)."""
    service = eb.broker.revive
    original = service.revive
    seen: list[tuple[int, int, int]] = []
    lock = threading.Lock()

    async def revive(ck: Any) -> bool:
        for offset in ck.unacked():
            got = eb.broker.store.get(ck.topic, ck.queue_id, offset, 1)
            if got.status is GetMessageStatus.FOUND and got.records:
                idx = int(read_stored(got.records[0]).properties.get("idx") or -1)
                with lock:
                    seen.append((idx, ck.pop_time, ck.invisible_time))
        return bool(await original(ck))
    service.revive = revive  # the pass loop looks the method up on each checkpoint
    return seen


def watch_changes(eb: EmbeddedBroker) -> list[int]:
    """The ``idx`` of every message whose invisible time is changed (an extension) from now on."""
    pop = eb.broker.pop
    original = pop.change_invisible
    changed: list[int] = []

    def change_invisible(group: str, topic: str, queue_id: int, offset: int, *args: Any, **kw: Any) -> Any:
        got = eb.broker.store.get(topic, queue_id, offset, 1)
        if got.status is GetMessageStatus.FOUND and got.records:
            changed.append(int(read_stored(got.records[0]).properties.get("idx") or -1))
        return original(group, topic, queue_id, offset, *args, **kw)
    pop.change_invisible = change_invisible
    return changed


def test_a_killed_instance_s_messages_come_back_within_the_invisible_time_plus_5s(tmp_path: Path,
                                                                                   runs: Runs) -> None:
    eb = start_broker(tmp_path, auto_create_queue_nums=2)
    try:
        produce(eb, "PopBack", 1)  # the topic exists (two queues) before the group starts
        set_pop_mode(eb, "GPopBack", "PopBack")
        revived, changed = watch_revives(eb), watch_changes(eb)
        record, times = tmp_path / "records.txt", tmp_path / "times.txt"
        fast = {"RMQRUN_POP_INVISIBLE_TIME_MS": str(INVISIBLE_MS), "RMQRUN_POP_POLL_TIME_MS": "2000"}
        keeper = runs.start("keeper", "tests.integration.handlers.pop_time_handler:record", namesrv=eb.namesrv_address,
                            group="GPopBack", topic="PopBack", args=["--consume-mode", "pop", "--workers", "1"],
                            env={"PROBE_RECORD": str(record), "PROBE_TIMES": str(times)}, settings=fast,
                            ready_timeout=60.0)
        # the victim's one worker hangs on its first message: what it pops after that waits, never acked
        victim = runs.start("victim", "tests.integration.handlers.probe_handler:hang", namesrv=eb.namesrv_address,
                            group="GPopBack", topic="PopBack", args=["--consume-mode", "pop", "--workers", "1"],
                            env={"PROBE_RECORD": str(record), "PROBE_HANG_IDX": "*"}, settings=fast,
                            ready_timeout=60.0)
        victim_workers = set(victim.worker_pids())
        sent = 1

        def victim_began() -> bool:
            return any(d.event == "start" and d.pid in victim_workers for d in read_deliveries(record))
        while not victim_began():  # both pop every queue: send until the victim has some
            produce(eb, "PopBack", 20, start=sent)
            sent += 20
            wait_until(lambda: victim_began() or len(deliveries_by_idx(record)) >= sent, 60, "the batch handled")
        # its call began: two thirds into the invisible time it is extended; the messages behind it, waiting for
        # the worker, are not (Java extends nothing): they come back on the clock of their pop
        wait_until(lambda: changed, 60, "the long call's invisibility extended")
        victim.kill9()  # its messages are popped: one in a call, the others waiting for its worker
        wait_until(lambda: len(deliveries_by_idx(record)) >= sent, 120, "every message handled", interval=0.2)
        keeper.signal(signal.SIGTERM)
        assert keeper.wait(60) == 0, keeper.log()[-3000:]
        victim.wait_group_gone()

        got = deliveries_by_idx(record)
        assert set(got) == set(range(sent)), "every message delivered at least once"
        hung = {d.idx for d in read_deliveries(record) if d.event == "start" and d.pid in victim_workers}
        back = {idx for idx, _, _ in revived}
        assert hung and hung <= back, "the message in the killed instance's call was revived"
        assert back - hung, "messages that waited behind the call were revived too"
        assert set(changed) <= hung, "only a message whose call had begun was extended"
        deadline: dict[int, int] = {}
        for idx, pop_time, invisible in revived:
            assert invisible >= INVISIBLE_MS
            deadline[idx] = max(deadline.get(idx, 0), pop_time + invisible + SLACK_MS)
        came_back: dict[int, int] = {}
        for idx, reconsume, began in read_times(times):
            if reconsume >= 1 and idx not in came_back:
                came_back[idx] = began
        assert set(came_back) == back, "each revived message came back to the other instance"
        late = {idx: came_back[idx] - deadline[idx] for idx in back if came_back[idx] > deadline[idx]}
        assert not late, f"ms past pop + invisible time + {SLACK_MS} ms, per idx: {late}"
    finally:
        eb.stop_in_thread()
