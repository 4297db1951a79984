"""Popping a topic's pop retry topic while the topic itself is pulled (``consume_mode: auto`` in PULL).

The broker revives what POP left un-acked (a failure's delay that ended, a
popped message whose invisible time lapsed) into ``%RETRY%<group>_<topic>``,
and only a pop of ``<topic>`` reads that retry topic. A group switched back to
pull would leave those messages there until it pops again. So while auto pulls
a topic whose pop retry topic exists, it pops the retry topic itself (queue -1
of ``%RETRY%<group>_<topic>``, a topic of one queue to the broker): the broker
shares it among the group's instances as any POP, nothing else reads it (pull
instances never do), so nothing is handled twice.

Such a message comes back under the retry topic's name; before a worker sees
it the record's topic field is replaced by the original topic (the handler
sees what it subscribed to, a dead letter names the original) and the popped
message carries the original topic too, which is what a batch ack names with
its retry flag. Its single ack and invisible-time change name the retry topic
(``ack_topic``), where it really is. A failure is delayed as usual; the broker
revives a checkpoint of a retry topic into that same retry topic.
"""

from __future__ import annotations


from rmqrun.client.pop_api import PoppedMessage
from rmqrun.remoting.errors import ProtocolError
from rmqrun.remoting.message import decode_message, encode_stored


def with_topic(record: bytes | memoryview, topic: str) -> bytes:
    """The stored record under another topic: every other field as stored (the body as it is on disk, so a
    compressed one stays compressed and its CRC holds), as the broker re-encodes a retry message it hands out."""
    msg, _ = decode_message(record, decompress=False)
    return bytes(encode_stored(
        topic=topic, body=msg.body, properties=dict(msg.properties), queue_id=msg.queue_id, flag=msg.flag,
        sys_flag=msg.sys_flag, born_timestamp=msg.born_timestamp, born_host=msg.born_host,
        store_timestamp=msg.store_timestamp, store_host=msg.store_host, reconsume_times=msg.reconsume_times,
        prepared_transaction_offset=msg.prepared_transaction_offset, queue_offset=msg.queue_offset,
        commit_log_offset=msg.commit_log_offset, crc=msg.body_crc))


def as_original(message: PoppedMessage, topic: str) -> PoppedMessage:
    """A message popped from ``topic``'s pop retry topic, as a pop of ``topic`` would have handed it out.

    A record that does not decode is left as it is: the worker reports it undecodable and it is
    dead-lettered as stored, as any popped record that does not decode."""
    try:
        record = with_topic(message.record, topic)
    except ProtocolError:
        return message
    return message.with_record(memoryview(record), topic)
