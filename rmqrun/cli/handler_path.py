"""Put the current directory on ``sys.path`` before a handler is named, as gunicorn does.

Handlers are usually modules in the directory rmqrun is started from
(``rmqrun run app:handle``); worker processes inherit ``sys.path``, so doing
it once in the command is enough for every worker.
"""

from __future__ import annotations

import os
import sys


def cwd_on_path() -> None:
    """The current directory first on ``sys.path`` unless it (or ``""``, its spelling) is there already."""
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
