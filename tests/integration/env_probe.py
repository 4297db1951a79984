"""A ``worker_init`` hook that writes what the worker's environment holds, for the secret-never-leaks tests.

Worker titles (setproctitle) are written over the process's original environment block, so
``/proc/PID/environ`` of a worker no longer shows its environment; the hook reads ``os.environ`` from inside the
worker instead. One line per worker to ``RMQRUN_HANDLER_ENV_PROBE``: ``pid secret-key-variable secret-value
handler-variable`` as 0/1 flags. The secret's value is looked for by its SHA-256 in
``RMQRUN_HANDLER_SECRET_SHA256`` (the value itself there would be found every time).
"""

from __future__ import annotations

import hashlib
import os


def probe() -> None:
    digest = os.environ["RMQRUN_HANDLER_SECRET_SHA256"]
    found = any(hashlib.sha256(v.encode()).hexdigest() == digest for v in os.environ.values())
    flags = ("RMQRUN_SECRET_KEY" in os.environ, found, "RMQRUN_HANDLER_RECORD" in os.environ)
    with open(os.environ["RMQRUN_HANDLER_ENV_PROBE"], "a", encoding="utf-8") as fh:
        fh.write(f"{os.getpid()} " + " ".join(str(int(f)) for f in flags) + "\n")
