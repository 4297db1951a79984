"""The connection-security settings of every connecting command, as one ClientSecurity.

``run`` and ``check`` take them from the settings table like every other
setting; ``produce``, ``status``, ``read``, ``topic``, ``offsets`` and ``spark``
get the same flags from ``security_options`` and the same YAML keys and
``RMQRUN_*`` variables through ``security_for`` (both in
:mod:`rmqrun.cli.security_options`). The secret itself has no
flag (a command line is visible to every user in ``ps``): it comes from the
config file, ``RMQRUN_SECRET_KEY`` or ``secret_key_file``.

The secret never leaves the supervisor's memory: workers are started without
the secret variables (``SECRET_ENV`` of rmqrun.remoting.security), and ``rmqrun check`` warns when a
file holding a secret can be read by other users (:func:`exposure_warnings`).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any, Protocol

from rmqrun.errors import ConfigError
from rmqrun.remoting.security import ClientSecurity


class Resolved(Protocol):
    """What this module reads of rmqrun.cli.settings.Resolved (the settings table imports this module)."""

    values: dict[str, Any]
    sources: dict[str, str]


#: the settings behind ClientSecurity (all in the settings table, target SECURITY)
SECURITY_KEYS = ("access_key", "secret_key", "secret_key_file", "security_token", "tls", "tls_ca_file",
                 "tls_cert_file", "tls_key_file", "tls_insecure")


def read_secret_file(path: str) -> str:
    """The secret in ``path``: its first line, stripped (a trailing newline is not part of it)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"secret_key_file={path!r} cannot be read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"secret_key_file={path!r} is not UTF-8 text") from None
    secret = text.splitlines()[0].strip() if text.strip() else ""
    if not secret:
        raise ConfigError(f"secret_key_file={path!r} is empty")
    return secret


def client_security(resolved: Resolved) -> ClientSecurity | None:
    """ClientSecurity from resolved settings; None when neither ACL nor TLS is set."""
    v = resolved.values
    secret = v.get("secret_key")
    if v.get("secret_key_file"):
        if secret:
            raise ConfigError(f"secret_key ({resolved.sources['secret_key']}) and secret_key_file "
                              f"({resolved.sources['secret_key_file']}) are both set: give one")
        secret = read_secret_file(v["secret_key_file"])
    if not (v.get("access_key") or secret or v.get("security_token") or v.get("tls") or v.get("tls_ca_file")
            or v.get("tls_cert_file") or v.get("tls_key_file") or v.get("tls_insecure")):
        return None
    security = ClientSecurity(access_key=v.get("access_key"), secret_key=secret,
                              security_token=v.get("security_token"), tls=bool(v.get("tls")),
                              tls_ca_file=v.get("tls_ca_file"), tls_cert_file=v.get("tls_cert_file"),
                              tls_key_file=v.get("tls_key_file"), tls_insecure=bool(v.get("tls_insecure")))
    security.ssl_context()  # a CA, certificate or key that does not load is a setting error now (exit 2)
    return security


def exposure_warnings(resolved: Resolved, config_file: str | None) -> list[str]:
    """Files holding a secret that other users can read (group or others permission bits)."""
    out: list[str] = []
    candidates: list[tuple[str, str]] = []
    if config_file and any(resolved.sources.get(k, "").startswith("config file")
                           for k in ("secret_key", "security_token")):
        candidates.append(("config file", config_file))
    if resolved.values.get("secret_key_file"):
        candidates.append(("secret_key_file", resolved.values["secret_key_file"]))
    for what, path in candidates:
        try:
            mode = os.stat(path).st_mode
        except OSError:
            continue
        if mode & (stat.S_IRGRP | stat.S_IROTH):
            out.append(f"{what} {path} holds a secret and is readable by other users (mode "
                       f"{stat.S_IMODE(mode):04o}): chmod 600 {path}")
    return out
