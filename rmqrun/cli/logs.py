"""Logging setup for the command line: loguru to stderr, text or JSON lines.

Worker processes configure their own sink (they carry worker id and pid);
this is the supervisor's and the other commands'. Standard ``logging`` and
``warnings`` are routed into it too, so JSON mode stays one object per line.
"""

from __future__ import annotations

import sys

from loguru import logger

from rmqrun.namespace import plain_text
from rmqrun.worker.logs import route_std_logging

TEXT_FORMAT = ("<green>{time:YYYY-MM-DD HH:mm:ss.SSS}</green> | <level>{level: <8}</level> | "
               "{extra[role]} | <level>{message}</level>")


def setup(level: str = "INFO", fmt: str = "text", role: str = "supervisor", namespace: str | None = None) -> None:
    """``namespace``: log lines show names under it plain, as handlers, metrics and status do."""
    logger.remove()
    if namespace:
        def plain(record: dict) -> None:  # type: ignore[type-arg]
            record["message"] = plain_text(namespace, record["message"])
        logger.configure(extra={"role": role}, patcher=plain)  # type: ignore[arg-type]
    else:  # (configure keeps a previous patcher when given None)
        logger.configure(extra={"role": role}, patcher=lambda record: None)
    if fmt == "json":
        logger.add(sys.stderr, level=level.upper(), serialize=True, backtrace=False, diagnose=False)
    else:
        logger.add(sys.stderr, level=level.upper(), format=TEXT_FORMAT, backtrace=False, diagnose=False,
                   colorize=None)
    # a library's logging record or a warning in this process: through the same sink, not as bare text
    route_std_logging(level)
