"""rmqrun: a process-pool consumer runner for Apache RocketMQ.

What a handler module needs is importable from here: the message types, the
results a handler may return, the ``@rmqrun.batch`` decorator and the
exception raised at the soft time limit. (Importing this package stays cheap:
none of these pull in the supervisor or any I/O.)
"""

from rmqrun.model import Message, MessageQueue
from rmqrun.worker.handler import WorkerInfo, batch
from rmqrun.worker.results import AckIndex, Commit, ReconsumeLater, Rollback, SuspendCurrentQueue
from rmqrun.worker.results import SoftTimeLimitExceeded

__version__ = "0.1.0"

__all__ = [
    "Message", "MessageQueue", "batch", "WorkerInfo", "ReconsumeLater", "AckIndex", "SuspendCurrentQueue",
    "Commit", "Rollback", "SoftTimeLimitExceeded", "__version__",
]
