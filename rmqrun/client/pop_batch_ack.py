"""The body of a POP consumer's BATCH_ACK_MESSAGE, built from its receipts in a few C passes.

``protocol.pop`` says what a batch ack is: :func:`~rmqrun.protocol.pop.batch_ack_words` groups receipts
by checkpoint into bitsets, :class:`~rmqrun.protocol.pop.BatchAck` and
:func:`~rmqrun.protocol.pop.encode_batch_ack_body` write them as fastjson does. On a POP consumer's ack
path that costs a Python step per receipt whenever a job's receipts are more than one checkpoint's (a pop
takes its messages from one queue, and a job holds what several pops brought, in offset order, so their
queues interleave), and a ``BatchAck``, a dict and a JSON encoder pass per checkpoint: together about a
twentieth of a no-op POP consumer's supervisor CPU. Here a group's receipts are split by queue in C, a
queue's receipts of one checkpoint (the usual case) get their word from their offsets' set, and the entries
are written as text: the same entries, acking the same offsets, as the ``protocol.pop`` path writes (a
test holds them to it).
"""

from __future__ import annotations

import base64
import json
from itertools import compress
from operator import itemgetter
from typing import Any, Sequence

from rmqrun.protocol.pop import ReceiptHandle

#: a receipt's checkpoint: retry flag, queue id, ck start offset, pop time (what one bitset acks)
_CK = itemgetter(4, 6, 0, 1)
_OFFSET, _QUEUE = itemgetter(7), itemgetter(6)


def _string(text: str) -> str:
    """A JSON string as ``json.dumps(..., ensure_ascii=False)`` writes it."""
    return json.dumps(text, ensure_ascii=False)


def _word(first: ReceiptHandle, offsets: list[int]) -> int:
    """The bitset acking ``offsets`` (sorted, distinct) of ``first``'s checkpoint: bit i acks its start + i."""
    start, low = first[0], offsets[0]
    if low < start:
        raise ValueError(f"receipt {first.encode()!r}: offset {low} before its checkpoint's start")
    if offsets[-1] - low + 1 == len(offsets):  # a run without gaps: ones from low to high
        return ((1 << len(offsets)) - 1) << (low - start)
    word = 0
    for offset in offsets:
        word |= 1 << (offset - start)
    return word


def checkpoint_words(receipts: Sequence[ReceiptHandle]) -> list[tuple[ReceiptHandle, int]]:
    """Per checkpoint of ``receipts``, its first receipt and the bitset's word: what
    :func:`~rmqrun.protocol.pop.batch_ack_words` returns, the checkpoints in the order their queues first
    appear (a queue's own in the order they first appear). Only a queue whose receipts belong to several
    checkpoints (pops of it at different times) takes a Python step per receipt."""
    if not receipts:
        return []
    queues = list(map(_QUEUE, receipts))
    distinct = dict.fromkeys(queues)
    out: list[tuple[ReceiptHandle, int]] = []
    for queue in distinct:
        mine = receipts if len(distinct) == 1 else list(compress(receipts, map(queue.__eq__, queues)))
        if len(mine) == 1 or len(set(map(_CK, mine))) == 1:
            out.append((mine[0], _word(mine[0], sorted(set(map(_OFFSET, mine))))))
            continue
        by_ck: dict[tuple[str, int, int, int], tuple[ReceiptHandle, set[int]]] = {}
        for r in mine:
            got = by_ck.get(_CK(r))
            if got is None:
                got = by_ck[_CK(r)] = (r, set())
            got[1].add(r[7])
        out.extend((first, _word(first, sorted(offsets))) for first, offsets in by_ck.values())
    return out


def batch_ack_body(group: str, broker_name: str | None,
                   groups: Sequence[tuple[str, Sequence[ReceiptHandle]]]) -> bytes:
    """The BatchAckMessageRequestBody acking ``groups`` (receipts with the original topic of their messages;
    a job's per group): one entry per (topic, checkpoint), the words of a checkpoint that several groups ack
    merged, written as fastjson writes it (the entries ``BatchAck.for_receipt`` and ``encode_batch_ack_body``
    make, without a ``BatchAck``, a dict and an encoder pass per entry). A receipt whose offset is before its
    checkpoint's start raises ValueError, as ``batch_ack_words`` does."""
    merged: dict[tuple[str, str, int, int, int], list[Any]] = {}
    for topic, receipts in groups:
        for f, word in checkpoint_words(receipts):
            key = (topic, f[4], f[6], f[0], f[1])
            got = merged.get(key)
            if got is None:
                merged[key] = [topic, f, word]
            else:
                got[2] |= word
    c = _string(group)
    strings: dict[str, str] = {}  # a topic or a retry flag as a JSON string, written once per request
    parts: list[str] = []
    b64 = base64.b64encode
    for topic, f, word in merged.values():
        t = strings.get(topic)
        if t is None:
            t = strings[topic] = _string(topic)
        r = strings.get(f[4])
        if r is None:
            r = strings[f[4]] = _string(f[4])
        b = b64(word.to_bytes((word.bit_length() + 7) // 8, "little")).decode("ascii")
        # fastjson's order: its @JSONField names sorted, as BatchAck.to_json has them
        parts.append(f'{{"b":"{b}","c":{c},"it":{f[2]},"pt":{f[1]},"q":{f[6]},"r":{r},"rq":{f[3]},"so":{f[0]},'
                     f'"t":{t}}}')
    tail = "}" if broker_name is None else f',"brokerName":{_string(broker_name)}}}'
    return ('{"acks":[' + ",".join(parts) + "]" + tail).encode("utf-8")
