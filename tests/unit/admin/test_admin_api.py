"""``rmqrun.admin`` from a program: each call against the embedded broker over TCP, with no click loaded.

The operator commands are thin over these calls (``docs/admin.md``); here they are called as a program would,
and what they return is checked against what was put on the broker: offsets and lag, an offset reset's plan and
its effect, dead letters listed, found and re-driven once, a group's POP mode set, listed and seen by the POP
status, a topic described, the lag exporter's readings.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Awaitable, Iterator, TypeVar

import pytest

from rmqrun.admin import (
    AdminError,
    Cluster,
    DeadLetter,
    DlqTarget,
    LagExporter,
    UnknownGroupError,
    choose_target,
    create_topic,
    delete_topic,
    describe_topic,
    find_dead_letter,
    list_dead_letters,
    list_group_modes,
    list_topics,
    pop_view,
    progress,
    redrive,
    reset_offsets,
    set_group_mode,
    update_topic,
)
from rmqrun.broker.app import EmbeddedBroker
from rmqrun.client.admin import TopicConfig
from rmqrun.client.instance import ClientInstance
from rmqrun.client.producer import Producer
from rmqrun.model import Message, MessageQueue
from rmqrun.pull import AsyncPullConsumer
from rmqrun.pull.dead_letters import DlqFilter, QueueBounds
from tests.waiting import eventually_async

pytestmark = pytest.mark.timeout(120)
T = TypeVar("T")


def run(coro: Awaitable[T]) -> T:
    return asyncio.run(asyncio.wait_for(coro, 60))  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def eb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    broker = EmbeddedBroker(tmp_path_factory.mktemp("admin") / "broker", auto_create_queue_nums=2).start_in_thread()
    try:
        yield broker
    finally:
        broker.stop_in_thread()


async def send(namesrv: str, topic: str, n: int, keys: str = "") -> list[str]:
    """``n`` messages on ``topic``, spread over its queues in turn; their msg ids."""
    ids = []
    async with Producer(namesrv, "AdminTestProducer") as producer:
        for i in range(n):
            result = await producer.send(topic, f"m{i}".encode(), keys=f"{keys}{i}" if keys else None, queue=i % 2)
            ids.append(result.msg_id)
    return ids


async def commit(eb: EmbeddedBroker, group: str, topic: str, offset: int) -> None:
    probe = ClientInstance(eb.namesrv_address, instance_name="admin-test-probe")
    try:
        for q in range(2):
            mq = MessageQueue(topic, eb.config.broker_name, q)
            await probe.broker.update_consumer_offset(eb.broker_address, group, mq, offset, oneway=False)
    finally:
        await probe.close()


def test_importing_the_admin_api_loads_neither_click_nor_the_command_line() -> None:
    code = ("import sys\nfrom rmqrun.admin import progress, pop_view, reset_offsets, list_dead_letters, redrive, "
            "describe_topic, set_group_mode, LagExporter\nimport rmqrun.admin.dlq, rmqrun.admin.group_mode\n"
            "print(sorted(m for m in sys.modules\n"
            "             if m in ('click', 'rmqrun.cli') or m.startswith(('click.', 'rmqrun.cli.'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]", out.stdout
    # and the check sees what it looks for: the command line does load click
    cli = subprocess.run([sys.executable, "-c", "import sys, rmqrun.cli.main; print('click' in sys.modules)"],
                         capture_output=True, text=True, timeout=60, check=True)
    assert cli.stdout.strip() == "True"


def test_progress_reports_offsets_and_lag_and_a_reset_plan_moves_them(eb: EmbeddedBroker) -> None:
    async def main() -> None:
        await send(eb.namesrv_address, "AdmLagT", 6)
        await commit(eb, "AdmLagG", "AdmLagT", 1)
        rows = await progress(eb.namesrv_address, "AdmLagG")
        assert [(r.mq.topic, r.mq.queue_id, r.broker_offset, r.consumer_offset, r.lag) for r in rows] == [
            ("AdmLagT", 0, 3, 1, 2), ("AdmLagT", 1, 3, 1, 2)]

        plan = await reset_offsets(Cluster(eb.namesrv_address), "AdmLagG", "AdmLagT",
                                   choose_target(to_earliest=True), execute=False)
        assert plan["path"] == "offline" and plan["dry_run"] is True and plan["clients"] == []
        assert [(r.old, r.new) for r in plan["rows"]] == [(1, 0), (1, 0)]
        assert [r.consumer_offset for r in await progress(eb.namesrv_address, "AdmLagG")] == [1, 1], \
            "a dry run changed the stored offsets"

        await reset_offsets(eb.namesrv_address, "AdmLagG", "AdmLagT", choose_target(to_offset=2), execute=True)
        assert [(r.consumer_offset, r.lag) for r in await progress(eb.namesrv_address, "AdmLagG")] == [(2, 1), (2, 1)]

        with pytest.raises(UnknownGroupError):
            await progress(eb.namesrv_address, "AdmNobodyG")
    run(main())


def test_the_lag_exporter_reads_a_group_and_flags_one_no_broker_knows(eb: EmbeddedBroker) -> None:
    async def main() -> None:
        await send(eb.namesrv_address, "AdmExpT", 4)
        await commit(eb, "AdmExpG", "AdmExpT", 1)
        instance = ClientInstance(eb.namesrv_address, instance_name="admin-test-exporter")
        try:
            exporter = LagExporter(instance, ["AdmExpG", "AdmExpNobody"], None)
            await exporter.read_all()
        finally:
            await instance.close()
        known, unknown = exporter.readings["AdmExpG"], exporter.readings["AdmExpNobody"]
        assert known.ok and known.known is True and sorted(r.lag for r in known.rows) == [1, 1]
        assert unknown.ok and unknown.known is False and not unknown.rows
    run(main())


async def dead_letter(eb: EmbeddedBroker, group: str, topic: str, n: int) -> list[str]:
    """Put ``n`` messages with keys ``key0..`` into ``%DLQ%<group>`` the broker's way: each pulled and sent back
    with delay level -1 (straight to the DLQ)."""
    ids = await send(eb.namesrv_address, topic, n, keys="key")
    async with AsyncPullConsumer(eb.namesrv_address, group) as consumer:
        for mq in await consumer.fetch_subscribe_message_queues(topic):
            result = await consumer.pull(mq, "*", 0)
            for msg in result.messages:
                await consumer.send_message_back(msg, delay_level=-1)
    return ids


def test_dead_letters_are_listed_found_and_redriven_once(eb: EmbeddedBroker) -> None:
    async def main() -> None:
        ids = await dead_letter(eb, "AdmDlqG", "AdmDlqT", 3)
        target = DlqTarget(eb.namesrv_address, "AdmDlqG")
        assert target.redrive_group == "AdmDlqG-redrive"

        async def listed() -> list[DeadLetter]:
            return [d async for d in list_dead_letters(target)]
        every = await eventually_async(lambda: _all_there(listed(), 3), what="three dead letters")
        assert sorted(d.item.msg_id for d in every if isinstance(d.item, Message)) == sorted(ids)
        assert all(d.redriven_to <= 0 for d in every), "nothing was re-driven yet"

        queues: list[QueueBounds] = []
        one = [d async for d in list_dead_letters(target, DlqFilter(keys=frozenset({"key1"})), queues=queues)]
        assert [d.item.msg_id for d in one if isinstance(d.item, Message)] == [ids[1]]
        assert queues and sum(b.high - b.low for b in queues) == 3, "every DLQ queue's bounds are reported"
        assert len([d async for d in list_dead_letters(target, limit=2)]) == 2

        found = await find_dead_letter(target, msg_id=ids[2])
        assert isinstance(found, Message) and found.body == b"m2"
        assert await find_dead_letter(target, msg_id="no-such-id") is None

        dry = await redrive(target, dry_run=True)
        assert len(dry.moved) == 3
        moved: list[str] = []
        report = await redrive(target, on_moved=lambda m: moved.append(m.message.msg_id))
        assert sorted(moved) == sorted(ids) and len(report.moved) == 3
        assert (await redrive(target)).moved == [], "a second re-drive moved messages again"
        highs = {b.mq: b.high for b in queues}
        back = [d async for d in list_dead_letters(target)]
        assert len(back) == 3 and all(d.redriven_to == highs[d.mq] for d in back), "the re-drive offsets moved"
    run(main())


async def _all_there(listing: Awaitable[list[DeadLetter]], n: int) -> list[DeadLetter] | None:
    found = await listing
    return found if len(found) >= n else None


def test_group_mode_is_set_listed_and_seen_by_the_pop_status(eb: EmbeddedBroker) -> None:
    async def main() -> None:
        await send(eb.namesrv_address, "AdmPopT", 1)
        before = await pop_view(eb.namesrv_address, "AdmPopG", ["AdmPopT"])
        assert [(t.topic, t.mode) for t in before.topics] == [("AdmPopT", "PULL")]

        done, refused = await set_group_mode(eb.namesrv_address, "AdmPopT", "AdmPopG", "POP", 1)
        assert done == [eb.broker_address] and refused == []
        rows, refused = await list_group_modes(eb.namesrv_address)
        mine = [r.to_json() for r in rows if r.group == "AdmPopG"]
        assert mine == [{"broker": eb.broker_address, "topic": "AdmPopT", "group": "AdmPopG", "mode": "POP",
                         "popShareQueueNum": 1}] and refused == []

        after = await pop_view(eb.namesrv_address, "AdmPopG", ["AdmPopT"])
        assert [(t.topic, t.mode, t.pop_share_queue_num) for t in after.topics] == [("AdmPopT", "POP", 1)]
        assert after.clients == (), "no POP client is online"
    run(main())


def test_describe_topic_lists_every_queue_with_its_offsets(eb: EmbeddedBroker) -> None:
    async def main() -> dict[str, Any]:
        await send(eb.namesrv_address, "AdmDescT", 5)
        return await describe_topic(eb.namesrv_address, "AdmDescT")
    out = run(main())
    json.dumps(out)  # what `topic describe --json` prints: plain data
    [broker] = out["brokers"]
    assert (broker["broker"], broker["read_queues"], broker["write_queues"], broker["perm"]) == (
        eb.config.broker_name, 2, 2, "RW-")
    assert [(q["queue"], q["access"], q["min_offset"], q["max_offset"]) for q in broker["queues"]] == [
        (0, "rw", 0, 3), (1, "rw", 0, 2)]


def test_a_topic_is_created_updated_listed_and_deleted(eb: EmbeddedBroker) -> None:
    async def main() -> None:
        ns = eb.namesrv_address
        done, conf = await create_topic(ns, TopicConfig("AdmLifeT", 4, 4, order=True))
        assert done == [eb.broker_address] and conf == f"{eb.config.broker_name}:4"
        with pytest.raises(AdminError, match="already exists"):
            await create_topic(ns, TopicConfig("AdmLifeT"))
        assert "AdmLifeT" in await list_topics(ns)
        assert "TBW102" not in await list_topics(ns) and "TBW102" in await list_topics(ns, show_all=True)

        changed = await update_topic(ns, "AdmLifeT", write_queues=2)
        [cfg] = changed.written.values()
        assert (cfg.read_queue_nums, cfg.write_queue_nums, cfg.order) == (4, 2, True), "fields not given changed"
        assert changed.order_conf_written and changed.order_conf == f"{eb.config.broker_name}:2"
        unordered = await update_topic(ns, "AdmLifeT", order=False)
        assert unordered.order_conf_written and unordered.order_conf is None

        assert await delete_topic(ns, "AdmLifeT") == [eb.broker_address]
        assert "AdmLifeT" not in await list_topics(ns)
        with pytest.raises(AdminError, match="does not exist"):
            await update_topic(ns, "AdmLifeT", perm=6)
    run(main())


def test_the_doc_shows_calls_the_package_exports() -> None:
    import rmqrun.admin as admin
    doc = (Path(__file__).resolve().parents[3] / "docs" / "admin.md").read_text()
    block = doc.split("```python", 1)[1].split("```", 1)[0]
    imported = block.split("from rmqrun.admin import (", 1)[1].split(")", 1)[0]
    names = [n.strip() for n in imported.replace("\n", " ").split(",") if n.strip()]
    assert names and all(hasattr(admin, n) for n in names), names
    assert sorted(admin.__all__) == sorted(admin._WHERE), "__all__ and the lazy table disagree"
    assert all(getattr(admin, n) is not None for n in admin.__all__)
    compile(block, "docs/admin.md", "exec")
