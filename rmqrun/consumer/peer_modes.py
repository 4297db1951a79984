"""What the other clients of a group pull and pop of a topic, from their running info: the settle step of auto.

Each instance of a group follows the broker's mode table at its own next
query, so for a while after ``rmqrun group mode`` some instances still pull a
topic and others already pop it. A popper that takes every queue while a
puller still has messages of one in flight hands those messages out again (the
pop starts at the committed offset, below them); a puller that starts while a
popper still pops every queue reads what the popper was handed. So an auto
instance asks the group's other clients what they hold before it widens:

* after a switch to POP it pops only its own pull share (queue by queue) while
  any other client still holds a queue of the topic in its pull table
  (``mqTable``, which Java clients report too); once none does it pops every
  queue as the broker says;
* a switch to pull waits, before it pulls, until no other client pops its
  queues of the topic (``mqPopTable``: every queue, or one of its share).

The question is GET_CONSUMER_RUNNING_INFO through a broker of the topic (what
``mqadmin consumerStatus`` sends), one client at a time. A client that does not
answer is left out: it cannot be waited for (it may be gone; the broker's list
lags a crash by up to two minutes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

from loguru import logger

from rmqrun.model import MessageQueue
from rmqrun.protocol.bodies import load_object, message_queue_from
from rmqrun.remoting.codes import RequestCode, ResponseCode
from rmqrun.remoting.errors import ProtocolError, error_for_code
from rmqrun.remoting.frame import RemotingCommand

if TYPE_CHECKING:
    from rmqrun.client.instance import ClientInstance

#: seconds one client may take to answer (Java's admin tools wait 5 s)
RUNNING_INFO_TIMEOUT = 5.0


@dataclass(slots=True)
class PeerHoldings:
    """The queues of one topic the group's other clients hold, by client id."""

    pulled: dict[str, set[MessageQueue]] = field(default_factory=dict)
    popped: dict[str, set[MessageQueue]] = field(default_factory=dict)

    def pullers(self) -> list[str]:
        return sorted(c for c, mqs in self.pulled.items() if mqs)

    def poppers_of(self, share: set[MessageQueue]) -> list[str]:
        """Clients popping every queue of the topic (queue id -1) or a queue of ``share``."""
        return sorted(c for c, mqs in self.popped.items() if any(mq.queue_id < 0 or mq in share for mq in mqs))


def _queues(table: Any, topic: str) -> set[MessageQueue]:
    out: set[MessageQueue] = set()
    for key in (table.keys() if isinstance(table, Mapping) else ()):
        try:
            mq = message_queue_from(key)
        except ProtocolError:
            continue
        if mq.topic == topic:
            out.add(mq)
    return out


async def peer_holdings(instance: "ClientInstance", addr: str, group: str, topic: str,
                        client_ids: list[str]) -> PeerHoldings:
    """Ask each of ``client_ids`` but this one, through broker ``addr``, what it pulls and pops of ``topic``."""
    out = PeerHoldings()
    for cid in client_ids:
        if cid == instance.client_id:
            continue
        ext = {"consumerGroup": group, "clientId": cid, "jstackEnable": "false"}
        try:
            resp = await instance.pool.request(addr, RemotingCommand(RequestCode.GET_CONSUMER_RUNNING_INFO, ext),
                                               RUNNING_INFO_TIMEOUT)
            if resp.code != ResponseCode.SUCCESS:
                raise error_for_code(resp.code, resp.remark, RequestCode.GET_CONSUMER_RUNNING_INFO)
            info = load_object(resp.body or b"{}")
        except Exception as exc:
            logger.debug("running info of {} not read: {}", cid, exc)
            continue
        out.pulled[cid] = _queues(info.get("mqTable"), topic)
        out.popped[cid] = _queues(info.get("mqPopTable"), topic)
    return out
