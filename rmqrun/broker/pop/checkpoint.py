"""One POP of one queue (``PopCheckPoint``): which offsets went out, when they come back, which are acked.

A checkpoint is named like Java's merge key: the real topic (the pop retry topic for a revived message), the
group, the queue, the first offset read, the pop time and the broker. Bit ``i`` of :attr:`PopCheckpoint.acked`
stands for ``offsets[i]`` (``PopCheckPoint.indexOfAck``): offsets need not be contiguous, a tag filter skips.

In the checkpoint log a checkpoint is one tab-separated record (:meth:`PopCheckpoint.to_record`) carrying a
number (:attr:`PopCheckpoint.log_id`) that its later ack and done records name instead of repeating the key;
a checkpoint whose names hold a tab or a line break is written as the older JSON line instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from json.encoder import encode_basestring_ascii as _json_str
from typing import Any

#: (topic, group, queue id, start offset, pop time, broker name)
CheckpointKey = tuple[str, str, int, int, int, str]

#: The first field of a compact checkpoint record (the ack and done records are ``a`` and ``d``).
RECORD_CK = "c"


def plain_names(*names: str) -> bool:
    """Whether names can go into a tab-separated record unescaped (topic and group names always can)."""
    text = "".join(names)  # three scans of one string: a checkpoint is written per queue a pop reads
    return "\t" not in text and "\n" not in text and "\r" not in text


@dataclass(slots=True)
class PopCheckpoint:
    topic: str
    group: str
    queue_id: int
    start_offset: int
    pop_time: int
    invisible_time: int
    revive_qid: int
    broker_name: str
    offsets: tuple[int, ...]
    acked: int = 0
    #: Its number in the checkpoint log (0: written as a JSON line, its acks name the key).
    log_id: int = field(default=0, compare=False, repr=False)

    @property
    def key(self) -> CheckpointKey:
        return (self.topic, self.group, self.queue_id, self.start_offset, self.pop_time, self.broker_name)

    @property
    def revive_time(self) -> int:
        """Epoch ms at which the un-acked messages are revived."""
        return self.pop_time + self.invisible_time

    @property
    def num(self) -> int:
        return len(self.offsets)

    def index_of(self, offset: int) -> int:
        """The bit of ``offset``, -1 if this pop did not hand it out."""
        i = offset - self.start_offset  # a pop without a tag filter read contiguous offsets: its own bit
        if 0 <= i < len(self.offsets) and self.offsets[i] == offset:
            return i
        try:
            return self.offsets.index(offset)
        except ValueError:
            return -1

    def ack(self, offset: int) -> bool:
        """Mark ``offset`` acked; False if it is not one of this checkpoint's (or was acked already)."""
        i = self.index_of(offset)
        if i < 0:
            return False
        bit = 1 << i
        if self.acked & bit:
            return False
        self.acked |= bit
        return True

    def ack_bits(self, mask: int) -> int:
        """Set the bits of ``mask`` (bit i: ``offsets[i]``); the bits that were not set before."""
        newly = mask & ((1 << len(self.offsets)) - 1) & ~self.acked
        self.acked |= newly
        return newly

    def is_acked(self, offset: int) -> bool:
        i = self.index_of(offset)
        return i >= 0 and bool(self.acked >> i & 1)

    @property
    def fully_acked(self) -> bool:
        return self.acked == (1 << self.num) - 1

    def unacked(self) -> list[int]:
        return [o for i, o in enumerate(self.offsets) if not self.acked >> i & 1]

    def to_json(self) -> dict[str, Any]:
        """Java's short names (``so pt it rq bn n``), offsets as diffs from ``so`` (``d``), bitmap ``bm``."""
        return {"t": self.topic, "c": self.group, "q": self.queue_id, "so": self.start_offset, "pt": self.pop_time,
                "it": self.invisible_time, "rq": self.revive_qid, "bn": self.broker_name,
                "d": [o - self.start_offset for o in self.offsets], "bm": self.acked}

    def to_line(self) -> str:
        """``{"op":"ck", **to_json()}`` as ``json.dumps(..., separators=(",", ":"))`` writes it, built directly:
        one is written per pop (the checkpoint log's hot path), and this costs a fraction of the dict and dump."""
        so = self.start_offset
        return (f'{{"op":"ck","t":{_json_str(self.topic)},"c":{_json_str(self.group)},"q":{self.queue_id},'
                f'"so":{so},"pt":{self.pop_time},"it":{self.invisible_time},"rq":{self.revive_qid},'
                f'"bn":{_json_str(self.broker_name)},"d":[{",".join([str(o - so) for o in self.offsets])}],'
                f'"bm":{self.acked}}}')

    def to_record(self) -> str:
        """``c <id> topic group queue so pt it rq broker offsets acked`` (tab-separated, ``acked`` in hex); the
        offsets as ``+n`` when they are ``so .. so+n-1`` (a pop without a filter), else diffs from ``so``. About a
        third of the JSON line's bytes and build time: one is written per queue a pop reads."""
        so, offsets = self.start_offset, self.offsets
        n = len(offsets)
        if n and offsets[-1] - so == n - 1:
            spread = f"+{n}"
        else:
            spread = ",".join([str(o - so) for o in offsets])
        return (f"c\t{self.log_id}\t{self.topic}\t{self.group}\t{self.queue_id}\t{so}\t{self.pop_time}\t"
                f"{self.invisible_time}\t{self.revive_qid}\t{self.broker_name}\t{spread}\t{self.acked:x}")

    @classmethod
    def from_record(cls, fields: list[str]) -> "PopCheckpoint":
        """The checkpoint of a :meth:`to_record` line split at its tabs (ValueError/IndexError if malformed)."""
        if len(fields) != 12 or fields[0] != RECORD_CK:
            raise ValueError(f"not a checkpoint record: {fields!r}")
        so, spread = int(fields[5]), fields[10]
        if spread.startswith("+"):
            offsets = tuple(range(so, so + int(spread[1:])))
        else:
            offsets = tuple(so + int(d) for d in spread.split(",")) if spread else ()
        return cls(topic=fields[2], group=fields[3], queue_id=int(fields[4]), start_offset=so,
                   pop_time=int(fields[6]), invisible_time=int(fields[7]), revive_qid=int(fields[8]),
                   broker_name=fields[9], offsets=offsets, acked=int(fields[11], 16), log_id=int(fields[1]))

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> "PopCheckpoint":
        so = int(obj["so"])
        return cls(topic=str(obj["t"]), group=str(obj["c"]), queue_id=int(obj["q"]), start_offset=so,
                   pop_time=int(obj["pt"]), invisible_time=int(obj["it"]), revive_qid=int(obj["rq"]),
                   broker_name=str(obj["bn"]), offsets=tuple(so + int(d) for d in obj["d"]),
                   acked=int(obj.get("bm", 0)))
