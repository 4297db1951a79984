"""What an operator asks a RocketMQ cluster, as calls a program can make: no click, no command line.

Each call takes the name server address (or a :class:`Cluster` with the ACL/TLS
settings), opens its own client and closes it, and returns plain data; the
``rmqrun`` commands (:mod:`rmqrun.cli`) only resolve their options, call these
and print. The names are loaded on first use (``from rmqrun.admin import
progress`` imports the client then, ``import rmqrun.admin`` alone does not).

- group status and lag: :func:`progress` (per queue offsets and lag),
  :func:`group_view` (what the brokers know of a group)
- POP: :func:`pop_view` (each topic's consume mode, every POP client's figures)
- offsets: :func:`reset_offsets` (the plan, applied with ``execute=True``),
  :func:`choose_target` (earliest, latest, a time, an offset or a shift)
- dead letters: :func:`list_dead_letters`, :func:`find_dead_letter`,
  :func:`redrive`, on a :class:`DlqTarget`
- the lag exporter's readings: :class:`LagExporter`
- topics: :func:`create_topic`, :func:`update_topic`, :func:`delete_topic`,
  :func:`list_topics`, :func:`describe_topic`
- group mode: :func:`set_group_mode`, :func:`list_group_modes`

See ``docs/admin.md`` for a program using them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: public name -> (module under rmqrun.admin, attribute)
_WHERE: dict[str, tuple[str, str]] = {
    "AdminError": ("session", "AdminError"),
    "Cluster": ("session", "Cluster"),
    "admin_session": ("session", "admin_session"),
    "GroupView": ("status", "GroupView"),
    "QueueProgress": ("status", "QueueProgress"),
    "StatusError": ("status", "StatusError"),
    "UnknownGroupError": ("status", "UnknownGroupError"),
    "group_view": ("status", "group_view"),
    "progress": ("status", "progress"),
    "PopAssignment": ("pop_status", "PopAssignment"),
    "PopClient": ("pop_status", "PopClient"),
    "PopView": ("pop_status", "PopView"),
    "TopicMode": ("pop_status", "TopicMode"),
    "pop_view": ("pop_status", "pop_view"),
    "QueuePlan": ("offsets", "QueuePlan"),
    "reset_offsets": ("offsets", "reset"),
    "OffsetTarget": ("offsets_target", "Target"),
    "choose_target": ("offsets_target", "choose_target"),
    "DeadLetter": ("dlq", "DeadLetter"),
    "DlqTarget": ("dlq", "DlqTarget"),
    "find_dead_letter": ("dlq", "find_dead_letter"),
    "list_dead_letters": ("dlq", "list_dead_letters"),
    "redrive": ("dlq", "redrive"),
    "GroupReading": ("lag_exporter", "GroupReading"),
    "LagExporter": ("lag_exporter", "LagExporter"),
    "TopicUpdate": ("topic", "TopicUpdate"),
    "create_topic": ("topic", "create_topic"),
    "delete_topic": ("topic", "delete_topic"),
    "describe_topic": ("topic", "describe_topic"),
    "list_topics": ("topic", "list_topics"),
    "update_topic": ("topic", "update_topic"),
    "BrokerRefusal": ("group_mode", "BrokerRefusal"),
    "GroupMode": ("group_mode", "GroupMode"),
    "list_group_modes": ("group_mode", "list_group_modes"),
    "set_group_mode": ("group_mode", "set_group_mode"),
}

__all__ = ["AdminError", "BrokerRefusal", "Cluster", "DeadLetter", "DlqTarget", "GroupMode", "GroupReading",
           "GroupView", "LagExporter", "OffsetTarget", "PopAssignment", "PopClient", "PopView", "QueuePlan",
           "QueueProgress", "StatusError", "TopicMode", "TopicUpdate", "UnknownGroupError", "admin_session",
           "choose_target", "create_topic", "delete_topic", "describe_topic", "find_dead_letter", "group_view",
           "list_dead_letters", "list_group_modes", "list_topics", "pop_view", "progress", "redrive",
           "reset_offsets", "set_group_mode", "update_topic"]

if TYPE_CHECKING:
    from rmqrun.admin.dlq import DeadLetter, DlqTarget, find_dead_letter, list_dead_letters, redrive
    from rmqrun.admin.group_mode import BrokerRefusal, GroupMode, list_group_modes, set_group_mode
    from rmqrun.admin.lag_exporter import GroupReading, LagExporter
    from rmqrun.admin.offsets import QueuePlan
    from rmqrun.admin.offsets import reset as reset_offsets
    from rmqrun.admin.offsets_target import Target as OffsetTarget
    from rmqrun.admin.offsets_target import choose_target
    from rmqrun.admin.pop_status import PopAssignment, PopClient, PopView, TopicMode, pop_view
    from rmqrun.admin.session import AdminError, Cluster, admin_session
    from rmqrun.admin.status import GroupView, QueueProgress, StatusError, UnknownGroupError, group_view, progress
    from rmqrun.admin.topic import TopicUpdate, create_topic, delete_topic, describe_topic, list_topics, update_topic


def __getattr__(name: str) -> Any:
    """Load a public name's module on first use (PEP 562), so importing the package loads no client."""
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'rmqrun.admin' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"rmqrun.admin.{where[0]}"), where[1])
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
