"""A handler that writes every way Python code writes: logging at four levels, print, stderr, warnings.

Each line carries the message body (``m<i>``) so a test can tie it to the message being handled.
"""

from __future__ import annotations

import logging
import sys
import warnings

import rmqrun

log = logging.getLogger("chatty")


def handle(msg: rmqrun.Message) -> None:
    body = msg.body.decode()
    log.debug("chatty-debug %s", body)
    log.info("chatty-info %s", body)
    log.warning("chatty-warning %s", body)
    log.error("chatty-error %s {not a format field}", body)
    print(f"chatty-print {body}")
    sys.stderr.write(f"chatty-stderr {body}\n")
    warnings.warn(f"chatty-warn {body}", UserWarning)
