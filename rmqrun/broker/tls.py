"""TLS for the embedded name server and broker (``--tls-cert-file/--tls-key-file [--tls-mode]``).

Java RocketMQ's ``tlsMode``: ``permissive`` accepts TLS and plain clients on
the same port (the remoting server looks at the first byte: 0x16 opens a TLS
handshake), ``enforcing`` accepts TLS only. Permissive is the default, as in
Java. Clients are not asked for certificates (Java's default
``tls.server.need.client.auth=none``).

The embedded broker makes no outgoing connections of its own (its name
server lives in the same process and reads the broker's tables directly;
calls to consumers go back over the consumer's own connection, TLS if the
consumer chose TLS), so there is no TLS client side to configure here.
"""

from __future__ import annotations

import os
import ssl
from typing import Any

TLS_MODES = ("permissive", "enforcing")


def check_tls_settings(cert: str | None, key: str | None, mode: str | None) -> None:
    """Refuse inconsistent TLS settings, naming the options (the files are read by :func:`server_context`)."""
    if (cert is None) != (key is None):
        given, missing = ("--tls-cert-file", "--tls-key-file")
        if cert is None:
            given, missing = missing, given
        raise ValueError(f"{given} needs {missing} too (a certificate chain and its private key)")
    if mode is not None:
        if mode not in TLS_MODES:
            raise ValueError(f"--tls-mode {mode!r} is invalid: one of {', '.join(TLS_MODES)}")
        if cert is None:
            raise ValueError(f"--tls-mode {mode} needs --tls-cert-file and --tls-key-file")
    if cert is not None and key is not None:
        server_context(cert, key)


def server_context(cert: str, key: str) -> ssl.SSLContext:
    """A server-side context for the certificate chain and key, or a ValueError naming the files."""
    for option, path in (("--tls-cert-file", cert), ("--tls-key-file", key)):
        if not os.path.isfile(path):
            raise ValueError(f"--tls-cert-file {cert} / --tls-key-file {key}: {option} {path} does not exist or is "
                             "not a file")
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        ctx.load_cert_chain(cert, key)
    except (ssl.SSLError, OSError) as exc:
        raise ValueError(f"--tls-cert-file {cert} / --tls-key-file {key}: not a usable certificate and key: "
                         f"{exc}") from None
    return ctx


def tls_server_options(cert: str | None, key: str | None, mode: str | None) -> dict[str, Any]:
    """The RemotingServer keyword arguments for these TLS settings (none without a certificate)."""
    if cert is None or key is None:
        return {}
    return {"ssl_context": server_context(cert, key), "tls_mode": mode or "permissive"}
