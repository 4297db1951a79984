"""The curated mutations of rmqrun's guarantee lines, for ``scripts/mutants.py``.

One entry per broken guarantee: ``find`` is exact text that must occur exactly
once in ``file`` (include a neighbouring line when a line alone is ambiguous),
``replace`` is what it becomes, and ``tests`` are the pytest ids (files or
``file::test``) that must fail. Keep ``tests`` small and precise: each mutant
runs only those, with ``-x``. Ids starting with ``canary-`` break code that runs
only inside worker processes: they are caught only if the workers import the
mutated copy.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mutant_kit import Mutant, m  # noqa: E402
from mutants_consumer import MUTANTS as CONSUMER  # noqa: E402
from mutants_consumer_pop import MUTANTS as CONSUMER_POP  # noqa: E402
from mutants_consumer_pull_path import MUTANTS as CONSUMER_PULL_PATH  # noqa: E402
from mutants_workers import MUTANTS as WORKERS  # noqa: E402
from mutants_broker import MUTANTS as BROKER  # noqa: E402
from mutants_broker_pop import MUTANTS as BROKER_POP  # noqa: E402
from mutants_wire_and_tools import MUTANTS as EDGES  # noqa: E402

__all__ = ["MUTANTS", "Mutant", "m"]

#: every mutant, one table per part of the code (a new mutant goes into the table of the part it breaks)
MUTANTS: list[Mutant] = [*CONSUMER, *CONSUMER_POP, *CONSUMER_PULL_PATH, *WORKERS, *BROKER, *BROKER_POP, *EDGES]
