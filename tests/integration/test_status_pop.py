"""``rmqrun status`` of a group in POP mode: the mode, each live client's POP figures, revived messages.

A real ``rmqrun run --consume-mode pop`` instance on the embedded broker (its
own thread, real TCP), the probe handler's ``hang`` (the first delivery of idx 1
never ends), invisible time 5 s so the hanging call gets its invisibility
extended. Then the same group as status sees it when the client does not answer
running info, after a ``kill -9`` (the broker revives the hanging message) and
on a broker that refuses GET_ALL_MESSAGE_REQUEST_MODE (RocketMQ 4.x): unknown,
never an error exit. A pull group on the same topic shows no POP part.
"""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path
from typing import Any

from rmqrun.broker.processors.common import answer
from rmqrun.client.instance import ClientInstance
from rmqrun.model import MessageQueue
from rmqrun.remoting.codes import RequestCode, ResponseCode
from tests.integration.cli_kit import run_cli
from tests.integration.pop_run_kit import deliveries_by_idx, set_pop_mode
from tests.integration.signals_kit import Runs, produce, start_broker, wait_until

GROUP, TOPIC = "GStPop", "StPop"


def _status(eb: Any, group: str, *args: str) -> Any:
    return run_cli(["status", "--namesrv", eb.namesrv_address, "--group", group, *args])


def _json(eb: Any, group: str = GROUP) -> dict[str, Any]:
    proc = _status(eb, group, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def _refuse(eb: Any, code: int, rc: int) -> None:
    async def refused(conn, cmd):  # type: ignore[no-untyped-def]
        return answer(cmd, rc, f"request type {cmd.code} refused by the test")
    eb.broker.server.register(code, refused)


def _commit(eb: Any, group: str, offset: int) -> None:
    async def main() -> None:
        inst = ClientInstance(eb.namesrv_address, instance_name="status-pop-test")
        try:
            for q in range(2):
                await inst.broker.update_consumer_offset(eb.broker_address, group, MessageQueue(TOPIC, "broker-a", q),
                                                         offset, oneway=False)
        finally:
            await inst.close()
    asyncio.run(main())


def test_status_covers_a_pop_group(tmp_path: Path, runs: Runs) -> None:
    eb = start_broker(tmp_path, auto_create_queue_nums=2)
    try:
        produce(eb, TOPIC, 4)
        set_pop_mode(eb, GROUP, TOPIC)
        record = tmp_path / "records.txt"
        p = runs.start("s", "tests.integration.handlers.probe_handler:hang", namesrv=eb.namesrv_address, group=GROUP,
                       # a worker each: nothing waits behind the hanging call in its worker's pipe, where it would
                       # lapse unextended (only begun calls are extended) and be revived
                       topic=TOPIC, args=["--consume-mode", "pop", "--workers", "4"],
                       env={"PROBE_RECORD": str(record), "PROBE_HANG_IDX": "1"},
                       settings={"RMQRUN_POP_INVISIBLE_TIME_MS": "5000", "RMQRUN_POP_POLL_TIME_MS": "2000"},
                       ready_timeout=60.0)
        wait_until(lambda: sorted(deliveries_by_idx(record)) == [0, 2, 3], 60, "the others handled", interval=0.2)

        def settled() -> dict[str, Any] | None:
            out = _json(eb)
            (client,) = out["pop_clients"] or [None]
            return out if client and client["acks"] == 3 and client["invisible_extensions"] >= 1 else None
        wait_until(settled, 60, "3 acks and an extension of the hanging call", interval=0.5)
        out = settled()
        assert out is not None
        assert out["consume_modes"] == [{"topic": TOPIC, "mode": "POP", "pop_share_queue_num": 0,
                                         "broker_revived_last_hour": 0, "broker_revived_total": 0}]
        (client,) = out["pop_clients"]
        assert client["answered"] is True and client["unacked"] == 1 and client["nacks"] == 0, client
        assert client["mode"] == "concurrently by POP", "the words of its start-up line (ConsumerConfig.mode)"
        assert client["invisible_time_ms"] == 5000
        assert [(a["topic"], a["queue"], a["unacked"], a["dropped"]) for a in client["assignments"]] == \
            [(TOPIC, -1, 1, False)]
        # the existing keys as before: the topic's two queues (and the retry topic, which stays on pull)
        assert [q["queue"] for q in out["queues"] if q["topic"] == TOPIC] == [0, 1]

        text = _status(eb, GROUP)
        assert text.returncode == 0, text.stderr
        assert f"topic {TOPIC}: consume mode POP, popShareQueueNum 0, revived by the broker 0 (last hour 0)" \
            in text.stdout
        row = next(line.split() for line in text.stdout.splitlines() if line.startswith(client["client_id"]))
        assert row[1:4] == ["1", "3", "0"], text.stdout  # un-acked, acks, nacks
        assert f"{TOPIC} broker-a queue -1: un-acked 1" in text.stdout

        # a pull group on the same topic: PULL in JSON, no POP part in the text
        _commit(eb, "GStPull", 1)
        pull = _json(eb, "GStPull")
        assert pull["consume_modes"] == [{"topic": TOPIC, "mode": "PULL", "pop_share_queue_num": None,
                                          "broker_revived_last_hour": None, "broker_revived_total": None}]
        assert pull["pop_clients"] == []
        text = _status(eb, "GStPull")
        assert text.returncode == 0 and "consume mode" not in text.stdout and "POP" not in text.stdout, text.stdout

        # a client that does not answer running info: unknown, exit 0
        _refuse(eb, RequestCode.GET_CONSUMER_RUNNING_INFO, ResponseCode.SYSTEM_ERROR)
        silent = _json(eb)
        assert [(c["answered"], c["acks"]) for c in silent["pop_clients"]] == [(False, None)]
        text = _status(eb, GROUP)
        assert text.returncode == 0 and "unknown" in text.stdout, text.stdout

        # kill -9: the hanging message is revived by the broker after its invisible time
        p.signal(signal.SIGKILL)
        p.wait(30)
        wait_until(lambda: _json(eb)["consume_modes"][0]["broker_revived_total"] == 1, 60,
                   "the revived message in the pop retry topic", interval=1.0)
        revived = _json(eb)["consume_modes"][0]
        assert revived["broker_revived_last_hour"] == 1 and revived["broker_revived_total"] == 1, revived
        text = _status(eb, GROUP)
        assert "revived by the broker 1 (last hour 1)" in text.stdout, text.stdout

        # a 4.x broker: the mode is unknown, the offsets are still shown
        _refuse(eb, RequestCode.GET_ALL_MESSAGE_REQUEST_MODE, ResponseCode.REQUEST_CODE_NOT_SUPPORTED)
        old = _json(eb)
        assert old["consume_modes"] == [{"topic": TOPIC, "mode": None, "pop_share_queue_num": None,
                                         "broker_revived_last_hour": None, "broker_revived_total": None}]
        assert old["pop_clients"] == []
        assert [q["queue"] for q in old["queues"] if q["topic"] == TOPIC] == [0, 1]
        text = _status(eb, GROUP)
        assert text.returncode == 0 and f"topic {TOPIC}: consume mode unknown" in text.stdout, text.stdout
    finally:
        eb.stop_in_thread()
