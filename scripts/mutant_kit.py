"""What every mutant table uses: the :class:`Mutant` entry, :func:`m`, and the paths its entries share.

The tables themselves are ``mutants_*.py`` beside this file (joined by :mod:`mutants_table`).

One entry per broken guarantee: ``find`` is exact text that must occur exactly
once in ``file`` (include a neighbouring line when a line alone is ambiguous),
``replace`` is what it becomes, and ``tests`` are the pytest ids (files or
``file::test``) that must fail. Keep ``tests`` small and precise: each mutant
runs only those, with ``-x``. Ids starting with ``canary-`` break code that runs
only inside worker processes: they are caught only if the workers import the
mutated copy.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mutant:
    id: str
    file: str
    what: str
    find: str
    replace: str
    tests: tuple[str, ...]


def m(id: str, file: str, what: str, find: str, replace: str, *tests: str) -> Mutant:
    return Mutant(id, file, what, find, replace, tuple(tests))


U = "tests/unit/"
I = "tests/integration/"
C = "tests/conformance/"
CC = "rmqrun/consumer/consume_concurrently.py"
CO = "rmqrun/consumer/consume_orderly.py"
OF = "rmqrun/consumer/orderly_failures.py"
PQ = "rmqrun/consumer/process_queue.py"
RT = "rmqrun/consumer/retry.py"
PL = "rmqrun/consumer/puller.py"
RB = "rmqrun/consumer/rebalance.py"
RP = "rmqrun/client/republish.py"
SLOW = I + "test_engine_concurrent.py::test_slow_message_holds_the_commit"
CHAIN = I + "test_engine_retry_chain.py"
ORD = I + "test_engine_orderly.py"
ORDX = I + "test_engine_orderly_locks.py"

_PUT_MESSAGES_HEAD = (
    "\n    async def put_messages(self, msgs: Sequence[InnerMessage]) -> list[Stored]:\n"
    "        \"\"\"Store messages of one queue back to back (a batch), then wake that queue's held pulls.\"\"\"\n"
    "        topic, queue_id = msgs[0].topic, msgs[0].queue_id\n"
    "        records = [m.to_record() for m in msgs]\n"
    "        codes = [m.tags_code for m in msgs]\n"
    "        results = self.store.put_many(topic, queue_id, records, codes)\n"
    "        self.stats.on_put(len(results), sum(len(r) for r in records))\n")
