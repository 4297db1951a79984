"""What a handler sees through the real worker loop: the same message as an eager decode gave it.

The worker now decodes from the RUN frame's bytes and leaves five fields of each
message to be filled on first read; it still resets a retried message's topic
(RETRY_TOPIC) and takes the namespace off. A handler that reads everything, and
one that changes ``properties``, must see exactly what they saw before.
"""

from __future__ import annotations

import dataclasses
import socket
from typing import Any

from rmqrun.model import Message
from rmqrun.pipe.wire import Batch, ConsumeMode, Done, encode_run
from rmqrun.pipe.worker_config import WorkerConfig
from rmqrun.remoting.message import encode_stored
from rmqrun.handler.loading import Handler
from rmqrun.worker.main import Worker
from tests.unit.worker.done_frames import read_done

RECORDS = [  # (topic as stored, properties, the topic the handler must see)
    ("Orders", {"UNIQ_KEY": "AAAA", "TAGS": "TagA", "KEYS": "k1 k2"}, "Orders"),
    ("%RETRY%CG", {"UNIQ_KEY": "BBBB", "RETRY_TOPIC": "Orders", "TAGS": "标签", "RECONSUME_TIME": "1"}, "Orders"),
    ("%RETRY%CG", {"TAGS": "x"}, "%RETRY%CG"),  # no RETRY_TOPIC: the topic stays
    ("Orders", {"ключ": "значение ✓", "TAGS": "t"}, "Orders"),
]


def _run(handler: Any, mode: ConsumeMode = ConsumeMode.CONCURRENT) -> Done:
    sup, mine = socket.socketpair()
    worker = Worker(WorkerConfig("unused:handle", batch_size=1, time_limit=900.0), 1, mine)
    worker.handler = Handler("test:handle", handler, False)
    records = [bytes(encode_stored(topic=t, body=f"body {i}".encode(), properties=p, queue_id=2, queue_offset=10 + i,
                                   commit_log_offset=1000 * i, born_host="10.0.0.9:40000",
                                   store_host="[::1]:10911", born_timestamp=5, store_timestamp=6))
               for i, (t, p, _) in enumerate(RECORDS)]
    sup.sendall(b"".join(bytes(x) for x in encode_run(Batch(1, "q", mode, "broker-a", records,
                                                            count=len(records)))))
    run = worker._next_frame()
    worker._run_batch(run)  # type: ignore[arg-type]
    worker.pipe.flush()
    done = read_done(sup)
    sup.close()
    mine.close()
    return done


def _expected(i: int) -> dict[str, Any]:
    from rmqrun.remoting.msg_id import offset_msg_id

    stored_topic, props, topic = RECORDS[i]
    off_id = offset_msg_id("[::1]:10911", 1000 * i)
    return {"topic": topic, "body": f"body {i}".encode(), "properties": dict(props),
            "msg_id": props.get("UNIQ_KEY") or off_id, "offset_msg_id": off_id, "broker_name": "broker-a",
            "queue_id": 2, "queue_offset": 10 + i, "commit_log_offset": 1000 * i, "born_host": "10.0.0.9:40000",
            "store_host": "[::1]:10911", "born_timestamp": 5, "store_timestamp": 6}


def test_a_handler_reading_every_field_sees_the_eager_values() -> None:
    seen: list[dict[str, Any]] = []

    def handle(msg: Message) -> None:
        seen.append({f.name: getattr(msg, f.name) for f in dataclasses.fields(msg)})

    for mode in ConsumeMode:
        seen.clear()
        done = _run(handle, mode)
        assert done.statuses == bytes(len(RECORDS)) and done.queue_offsets == (10, 11, 12, 13)
        for i, fields in enumerate(seen):
            want = _expected(i)
            assert {k: fields[k] for k in want} == want, i
            assert type(fields["properties"]) is dict


def test_a_handler_changing_properties_sees_its_changes_and_the_next_message_is_untouched() -> None:
    seen: list[tuple[Any, ...]] = []

    def handle(msg: Message) -> None:
        before = dict(msg.properties)
        msg.properties["TAGS"] = "changed"
        msg.properties.pop("KEYS", None)
        msg.properties["added"] = "1"
        seen.append((before, msg.tags, msg.keys, dict(msg.properties), msg.msg_id, msg.topic))

    done = _run(handle)
    assert done.statuses == bytes(len(RECORDS))
    for i, (before, tags, keys, after, msg_id, topic) in enumerate(seen):
        want = _expected(i)
        assert before == want["properties"], "each message starts from its own record's properties"
        assert (tags, keys) == ("changed", None)
        kept = {k: v for k, v in want["properties"].items() if k != "KEYS"}
        assert after == {**kept, "TAGS": "changed", "added": "1"}
        assert (msg_id, topic) == (want["msg_id"], want["topic"])
