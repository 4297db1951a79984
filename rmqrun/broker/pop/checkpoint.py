"""One POP of one queue (``PopCheckPoint``): which offsets went out, when they come back, which are acked.

A checkpoint is named like Java's merge key: the real topic (the pop retry topic for a revived message), the
group, the queue, the first offset read, the pop time and the broker. Bit ``i`` of :attr:`PopCheckpoint.acked`
stands for ``offsets[i]`` (``PopCheckPoint.indexOfAck``): offsets need not be contiguous, a tag filter skips.
"""

from __future__ import annotations

from dataclasses import dataclass
from json.encoder import encode_basestring_ascii as _json_str
from typing import Any

#: (topic, group, queue id, start offset, pop time, broker name)
CheckpointKey = tuple[str, str, int, int, int, str]


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

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> "PopCheckpoint":
        so = int(obj["so"])
        return cls(topic=str(obj["t"]), group=str(obj["c"]), queue_id=int(obj["q"]), start_offset=so,
                   pop_time=int(obj["pt"]), invisible_time=int(obj["it"]), revive_qid=int(obj["rq"]),
                   broker_name=str(obj["bn"]), offsets=tuple(so + int(d) for d in obj["d"]),
                   acked=int(obj.get("bm", 0)))
