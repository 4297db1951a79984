"""The one security object every connection of a client carries: ACL credentials and TLS.

:class:`ClientSecurity` is a small frozen value, built once from the settings
(``access_key``, ``secret_key``, ``security_token``, ``tls``, ``tls_ca_file``,
``tls_cert_file``, ``tls_key_file``, ``tls_insecure``) and handed to the
connection pool, which gives it to every connection it opens: to name servers
and brokers alike, as the Java client's RPC hook and TLS switch apply to both.
A connection calls :meth:`ClientSecurity.sign` on each request it sends and
:meth:`ClientSecurity.ssl_context` when it connects. Nothing else in rmqrun
needs to know about either.

It can be pickled (Spark ships it to executors): the SSL context is built
where it is used and cached per process, not stored in the value.

The secret key and the security token never appear in ``repr``, ``str`` or
:meth:`describe`; only the access key does, as brokers' refusals name it too.
"""

from __future__ import annotations

import ssl
import threading
from dataclasses import dataclass, field

from rmqrun.errors import ConfigError
from rmqrun.remoting import acl_sign
from rmqrun.remoting.frame import RemotingCommand

#: the environment variables that carry secrets (the settings secret_key and security_token):
#: read by the command, never passed on to worker processes
SECRET_ENV = ("RMQRUN_SECRET_KEY", "RMQRUN_SECURITY_TOKEN")


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    """ACL 1.0 credentials and TLS options of a client (all optional).

    With ``access_key`` set, every request is signed (see :mod:`rmqrun.remoting.acl_sign`).
    With ``tls`` set, every connection is TLS; the server's certificate is verified
    against ``tls_ca_file`` (or the system's CAs) and its host name or IP unless
    ``tls_insecure``. ``tls_cert_file``/``tls_key_file`` present a client certificate.
    """

    access_key: str | None = None
    secret_key: str | None = field(default=None, repr=False)
    security_token: str | None = field(default=None, repr=False)
    tls: bool = False
    tls_ca_file: str | None = None
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    tls_insecure: bool = False

    def __post_init__(self) -> None:
        if self.access_key and not self.secret_key:
            raise ConfigError(f"access_key={self.access_key!r} is set but secret_key is not "
                              "(give secret_key, RMQRUN_SECRET_KEY or secret_key_file)")
        if self.secret_key and not self.access_key:
            raise ConfigError("secret_key is set but access_key is not (give access_key, RMQRUN_ACCESS_KEY or "
                              "--access-key)")
        if self.security_token and not self.access_key:
            raise ConfigError("security_token is set but access_key is not")
        if self.tls_key_file and not self.tls_cert_file:
            raise ConfigError(f"tls_key_file={self.tls_key_file!r} is set but tls_cert_file is not")
        if not self.tls and (self.tls_ca_file or self.tls_cert_file or self.tls_key_file or self.tls_insecure):
            given = [k for k in ("tls_ca_file", "tls_cert_file", "tls_key_file", "tls_insecure") if getattr(self, k)]
            raise ConfigError(f"{', '.join(given)} given without tls: true (--tls); set tls to connect with TLS")

    # ----------------------------------------------------------------- ACL

    @property
    def signs(self) -> bool:
        return bool(self.access_key)

    def sign(self, cmd: RemotingCommand) -> None:
        """Add AccessKey/SecurityToken/Signature to an outgoing request (nothing without an access key)."""
        if self.access_key and self.secret_key:
            acl_sign.sign(cmd, self.access_key, self.secret_key, self.security_token)

    # ----------------------------------------------------------------- TLS

    def ssl_context(self) -> ssl.SSLContext | None:
        """The client SSL context (one per process and settings), or None without TLS.

        Raises :class:`ConfigError` naming the file when a CA, certificate or key cannot be loaded.
        """
        if not self.tls:
            return None
        key = (self.tls_ca_file, self.tls_cert_file, self.tls_key_file, self.tls_insecure)
        with _CONTEXTS_LOCK:
            ctx = _CONTEXTS.get(key)
            if ctx is None:
                ctx = _CONTEXTS[key] = self._build_context()
        return ctx

    def _build_context(self) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        if self.tls_insecure:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        elif self.tls_ca_file:
            try:
                ctx.load_verify_locations(cafile=self.tls_ca_file)
            except (OSError, ssl.SSLError) as exc:
                raise ConfigError(f"tls_ca_file={self.tls_ca_file!r} cannot be loaded: {_why(exc)}") from None
        else:
            ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
        if self.tls_cert_file:
            try:
                ctx.load_cert_chain(self.tls_cert_file, self.tls_key_file)
            except (OSError, ssl.SSLError) as exc:
                raise ConfigError(f"tls_cert_file={self.tls_cert_file!r} / tls_key_file={self.tls_key_file!r} "
                                  f"cannot be loaded: {_why(exc)}") from None
        return ctx

    # ----------------------------------------------------------------- text

    def describe(self) -> str:
        """One line for logs and ``rmqrun check``: what is on, never a secret."""
        parts = []
        if self.access_key:
            parts.append(f"ACL access key {self.access_key}" + (" with security token" if self.security_token else ""))
        if self.tls:
            verify = "server NOT verified (tls_insecure)" if self.tls_insecure else (
                f"server verified against {self.tls_ca_file}" if self.tls_ca_file else "server verified (system CAs)")
            parts.append(f"TLS, {verify}" + (f", client certificate {self.tls_cert_file}" if self.tls_cert_file else ""))
        return "; ".join(parts) if parts else "no ACL, no TLS"


_CONTEXTS: dict[tuple[object, ...], ssl.SSLContext] = {}
_CONTEXTS_LOCK = threading.Lock()


def _why(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__
