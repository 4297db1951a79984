"""The chaos suite's POP group: ``rmqrun run --consume-mode pop`` instances under the same faults as the others.

The group is switched to POP on every master before its first instance starts (what ``rmqrun group mode
--mode pop`` sends), so its instances share all the topic's queues instead of splitting them. Its handler
failures travel through the pop retry topic ``%RETRY%<group>_<topic>`` (a failed message is made visible
again after the POP delay, then revived there by the broker), so the audit reads that topic besides
``%RETRY%<group>``. The invisible time is short (10 s) so that what a killed instance held comes back
within the suite's fault gaps; duplicates of such messages are explained by the kill like any other.
"""

from __future__ import annotations

POP_GROUP = "chaos_pop"
#: what a POP instance runs with beyond the suite's common settings
POP_SETTINGS = {"RMQRUN_CONSUME_MODE": "pop", "RMQRUN_POP_INVISIBLE_TIME_MS": "10000"}


def group_settings(group: str) -> dict[str, str]:
    return dict(POP_SETTINGS) if group == POP_GROUP else {}


def retry_topics(group: str, topic: str) -> list[str]:
    """The retry topics a group's failed messages can sit in."""
    from rmqrun.topic_names import pop_retry_topic, retry_topic
    topics = [retry_topic(group)]
    if group == POP_GROUP:
        topics.append(pop_retry_topic(group, topic))
    return topics


async def set_pop_mode(namesrv: str, topic: str, group: str = POP_GROUP) -> list[str]:
    """SET_MESSAGE_REQUEST_MODE(POP) on every master; returns their addresses."""
    from rmqrun.client.admin import AdminClient
    from rmqrun.client.assignment import AssignmentClient
    from rmqrun.client.instance import ClientInstance
    from rmqrun.protocol.assignment import MessageRequestMode
    inst = ClientInstance(namesrv, instance_name="chaos-pop-mode")
    try:
        masters = (await AdminClient(inst.pool, inst.namesrv).cluster_info()).all_masters()
        for addr in masters:
            await AssignmentClient(inst.pool).set_message_request_mode(addr, topic, group, MessageRequestMode.POP)
        return masters
    finally:
        await inst.close()
