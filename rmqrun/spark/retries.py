"""How a backfill's tasks get retried, and how a job that failed anyway is explained in one line.

Spark's local masters (``local``, ``local[N]``, ``local[*]``) run each task
exactly once: the second number of ``local[N,F]`` is the attempts a task gets,
and ``spark.task.maxFailures`` is ignored there. A backfill on the default
master would then throw away every finished partition because one Python worker
died. So :func:`with_task_retries` gives a local master without that number the
attempts a cluster would give (``spark.task.maxFailures``, 4 by default) and
says so; a master that already names them, and cluster masters, are kept.

A failed job reaches the driver as a Py4J error whose first line is the Java
call (``An error occurred while calling z:...collectAndServe``);
:func:`job_failure_cause` digs out what the user needs: our partition's own
error line when a handler or pull raised, else Spark's "task N failed K times,
most recent failure: ..." with the Java cause.
"""

from __future__ import annotations

import re
from typing import Mapping

#: Spark's default of spark.task.maxFailures (what a standalone cluster gives each task)
DEFAULT_ATTEMPTS = 4

_LOCAL_ONCE = re.compile(r"^local(?:\[(\*|[1-9]\d*)\])?$")
_OURS = re.compile(r"rmqrun spark: partition \d+ \(.*")  # the message, not the source line that formats it
_STAGE = re.compile(r"Job aborted due to stage failure: (.*)")
_LOST = re.compile(r"(Task \d+ in stage \S+ failed \d+ times?), most recent failure: Lost task \S+ in stage \S+ "
                   r"\([^)]*\)(?: \([^)]*\))?: (.*)")


def attempts(conf: Mapping[str, str]) -> int:
    """The attempts per task asked for with ``--conf spark.task.maxFailures=N`` (else Spark's default)."""
    raw = conf.get("spark.task.maxFailures", "").strip()
    return int(raw) if raw.isdigit() and int(raw) >= 1 else DEFAULT_ATTEMPTS


def with_task_retries(master: str, conf: Mapping[str, str]) -> tuple[str, str | None]:
    """``master`` with task attempts where it would run each task once, and a note saying so (else None)."""
    found = _LOCAL_ONCE.match(master.strip())
    if not found:
        return master, None
    threads = found.group(1) or "1"
    n = attempts(conf)
    retrying = f"local[{threads},{n}]"
    return retrying, (f"master {master} runs each task once; using {retrying} so a failed task is retried "
                      f"({n} attempts; --master local[N,F] or --conf spark.task.maxFailures=F sets them)")


def job_failure_cause(exc: BaseException) -> str:
    """One line: the failed partition's own error, else the stage failure's task and Java cause."""
    text = str(exc)
    lines = text.splitlines()
    for line in lines:
        found = _OURS.search(line)
        if found:
            return found.group(0).strip()
    for line in lines:
        stage = _STAGE.search(line)
        if stage:
            lost = _LOST.match(stage.group(1).strip())
            if lost:
                return f"{lost.group(1)}; the last attempt: {lost.group(2).strip()}"[:500]
            return stage.group(1).strip()[:500]
    first = next((ln.strip() for ln in lines if ln.strip()), type(exc).__name__)
    return first[:500]
