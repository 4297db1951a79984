"""The Spark source's and sink's security options become one ClientSecurity (or a clear OptionError)."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from rmqrun.remoting.security import ClientSecurity
from rmqrun.spark.errors import OptionError
from rmqrun.spark.options import ReadOptions, WriteOptions

BASE = {"namesrv": "127.0.0.1:9876", "topic": "T"}


def test_no_security_options_means_none() -> None:
    assert ReadOptions.parse(BASE).security is None
    assert WriteOptions.parse(BASE).security is None


def test_options_map_to_client_security_and_the_secret_stays_out_of_repr(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("s3cr3t\nignored second line\n", encoding="utf-8")
    opts = ReadOptions.parse({**BASE, "accessKey": "ak", "secretKeyFile": str(secret), "tls": "true",
                              "tlsCaFile": "/ca.pem"})
    assert opts.security == ClientSecurity("ak", "s3cr3t", tls=True, tls_ca_file="/ca.pem")
    assert "s3cr3t" not in repr(opts)
    assert pickle.loads(pickle.dumps(opts)) == opts  # shipped to executors
    # Spark lower-cases option names; both spellings work
    w = WriteOptions.parse({**BASE, "accesskey": "ak", "secretkey": "x", "tlsinsecure": "true", "tls": "1"})
    assert w.security == ClientSecurity("ak", "x", tls=True, tls_insecure=True)


@pytest.mark.parametrize("extra, words", [
    ({"accessKey": "ak"}, "accessKey is set but neither secretKey nor secretKeyFile is"),
    ({"secretKey": "sk"}, "secretKey is set but accessKey is not"),
    ({"accessKey": "ak", "secretKey": "sk", "secretKeyFile": "/x"}, "secretKey or secretKeyFile, not both"),
    ({"tlsCaFile": "/ca.pem"}, "tlsCaFile needs option tls=true"),
    ({"tls": "maybe"}, "option tls must be true or false"),
    ({"accessKey": "ak", "secretKeyFile": "/does/not/exist"}, "secretKeyFile: cannot read /does/not/exist"),
])
def test_bad_security_options_are_named(extra: dict[str, str], words: str) -> None:
    with pytest.raises(OptionError, match=words) as info:
        ReadOptions.parse({**BASE, **extra})
    assert "sk" not in str(info.value).replace("secretKey", "").replace("Sk", "")
