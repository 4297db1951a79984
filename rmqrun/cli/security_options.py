"""The ACL/TLS flags of the connecting commands besides run/check, from the one settings table.

``produce``, ``status``, ``read``, ``topic`` and ``offsets`` take the flags the
settings table gives ``access_key``, ``secret_key_file`` and the ``tls*`` keys;
:func:`security_for` resolves them over ``RMQRUN_*`` and the config file, as
``run`` does, into one :class:`~rmqrun.remoting.security.ClientSecurity`.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

from rmqrun.cli.security import SECURITY_KEYS, client_security
from rmqrun.cli.settings_options import setting_option
from rmqrun.remoting.security import ClientSecurity


def security_for(flags: dict[str, Any], config_file: str | None) -> ClientSecurity | None:
    """What a connecting command other than run/check uses: its flags over RMQRUN_* over the config file."""
    from rmqrun.cli import settings as table
    return client_security(table.resolve(flags, config_file=config_file))


def security_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Add the security flags of the settings table to a command; it receives them as ``security_flags``."""
    from rmqrun.cli.settings import BY_KEY
    keys = [k for k in SECURITY_KEYS if BY_KEY[k].flag]

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        kwargs["security_flags"] = {k: kwargs.pop(k) for k in keys}
        return fn(*args, **kwargs)

    for key in reversed(keys):
        wrapper = setting_option(BY_KEY[key], wrapper)
    return wrapper
