"""rmqrun: a process-pool consumer runner for Apache RocketMQ.

The handler contract (``--handler module:function``; ``module`` alone means
``module:handle``)::

    import rmqrun

    def handle(msg: rmqrun.Message) -> None | result:   # one message per call
        ...

    @rmqrun.batch                                        # a list of up to
    def handle_many(msgs: list[rmqrun.Message]):         # consumeMessageBatchMaxSize
        ...

Return ``None`` for success. Raising means failure: RECONSUME_LATER in
concurrent mode, SUSPEND_CURRENT_QUEUE_A_MOMENT in orderly mode. Explicit
results: ``ReconsumeLater(delay_level=0)`` and ``AckIndex(n)`` (concurrent),
``SuspendCurrentQueue(ms=-1)``, ``Commit()`` and ``Rollback()`` (orderly).
Anything else is logged once, naming the handler, and counts as a failure.
A handler runs in a worker process's main thread; the batch's time limit
interrupts it with :class:`SoftTimeLimitExceeded` (SIGALRM is the worker's).
Optional ``worker_init`` / ``worker_exit`` hooks (``module:function``, taking
no argument or a :class:`WorkerInfo`) run once per worker process.

Importing this package stays cheap: none of these names pull in the
supervisor or any I/O.
"""

from rmqrun.model import Message, MessageQueue
from rmqrun.handler.loading import WorkerInfo, batch
from rmqrun.handler.results import AckIndex, Commit, ReconsumeLater, Rollback, SuspendCurrentQueue
from rmqrun.handler.results import SoftTimeLimitExceeded

__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    """``rmqrun.PullConsumer`` / ``rmqrun.AsyncPullConsumer``, imported on first use so that
    ``import rmqrun`` (every worker does it) never loads the client layer."""
    if name in ("PullConsumer", "AsyncPullConsumer", "ClientSecurity"):
        import rmqrun.pull

        return getattr(rmqrun.pull, name)
    raise AttributeError(f"module 'rmqrun' has no attribute {name!r}")


__all__ = [
    "Message", "MessageQueue", "batch", "WorkerInfo", "ReconsumeLater", "AckIndex", "SuspendCurrentQueue",
    "Commit", "Rollback", "SoftTimeLimitExceeded", "__version__",
    "PullConsumer", "AsyncPullConsumer", "ClientSecurity",
]
