"""A throw-away certificate authority for TLS tests (the ``cryptography`` package, test extra).

    ca = TestCA.create(tmp_path / "ca")
    server = ca.issue(tmp_path / "server")                 # for 127.0.0.1, ::1 and localhost
    expired = ca.issue(tmp_path / "old", expired=True)     # not valid any more
    other = TestCA.create(tmp_path / "other-ca")           # a CA the client does not trust

Each :class:`CertFiles` holds PEM paths (``cert``, ``key``, and ``ca`` of its
issuer), ready for ``--tls-cert/--tls-key`` or a client's ``tls_ca_file``.
:func:`client_context` builds an ``ssl.SSLContext`` trusting one CA, for
tests that talk to a TLS broker without rmqrun's client. Keys are EC P-256:
quick to make, accepted by every OpenSSL.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

DEFAULT_HOSTS = ("127.0.0.1", "::1", "localhost")


@dataclass(frozen=True)
class CertFiles:
    cert: Path
    key: Path
    ca: Path


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name),
                      x509.NameAttribute(NameOID.ORGANIZATION_NAME, "rmqrun tests")])


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    path.chmod(0o600)


def _san(hosts: tuple[str, ...]) -> x509.SubjectAlternativeName:
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return x509.SubjectAlternativeName(names)


@dataclass(frozen=True)
class TestCA:
    __test__ = False  # not a pytest test class

    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate
    cert_path: Path

    @classmethod
    def create(cls, directory: Path, name: str = "rmqrun test CA") -> "TestCA":
        directory.mkdir(parents=True, exist_ok=True)
        key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.timezone.utc)
        cert = (x509.CertificateBuilder()
                .subject_name(_name(name)).issuer_name(_name(name))
                .public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - dt.timedelta(days=1)).not_valid_after(now + dt.timedelta(days=30))
                .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                             content_commitment=False, key_encipherment=False,
                                             data_encipherment=False, key_agreement=False, encipher_only=False,
                                             decipher_only=False), critical=True)
                .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
                .sign(key, hashes.SHA256()))
        cert_path = directory / "ca.pem"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        _write_key(directory / "ca.key", key)
        return cls(key, cert, cert_path)

    def issue(self, directory: Path, name: str = "rmqrun test server", *, hosts: tuple[str, ...] = DEFAULT_HOSTS,
              expired: bool = False, client: bool = False) -> CertFiles:
        """A leaf certificate signed by this CA, valid for ``hosts`` (or expired a day ago)."""
        directory.mkdir(parents=True, exist_ok=True)
        key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.timezone.utc)
        if expired:
            not_before, not_after = now - dt.timedelta(days=30), now - dt.timedelta(days=1)
        else:
            not_before, not_after = now - dt.timedelta(days=1), now + dt.timedelta(days=30)
        usage = ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH
        cert = (x509.CertificateBuilder()
                .subject_name(_name(name)).issuer_name(self.cert.subject)
                .public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(not_before).not_valid_after(not_after)
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
                .add_extension(_san(hosts), critical=False)
                .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()),
                               critical=False)
                .sign(self.key, hashes.SHA256()))
        cert_path, key_path = directory / "cert.pem", directory / "key.pem"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        _write_key(key_path, key)
        return CertFiles(cert_path, key_path, self.cert_path)


def client_context(ca_file: Path | None, *, verify: bool = True) -> ssl.SSLContext:
    """A client context trusting ``ca_file`` (verification and host names on), or trusting anything."""
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(ca_file) if ca_file else None)
    if not verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx
