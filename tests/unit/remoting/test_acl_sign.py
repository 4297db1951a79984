"""ACL 1.0 signatures: vectors from the definition, from Apache mqadmin and from the Apache C++ client.

The expected values are computed here with hmac/hashlib/base64 straight from the
definition (HMAC-SHA1 under the secret key over the extension-field values in
name order, then the body, Base64), or read from frames real Apache software sent;
never by calling the code under test.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import pickle

import pytest

from rmqrun.errors import ConfigError
from rmqrun.remoting import acl_sign
from rmqrun.remoting.codes import RequestCode
from rmqrun.remoting.frame import RemotingCommand
from rmqrun.remoting.security import ClientSecurity
from tests import captures
from tests.captures import requires_captures


def definition(fields: dict[str, str], body: bytes, secret: str) -> str:
    """The signature as the definition states it, independent of rmqrun's code."""
    content = "".join(fields[k] for k in sorted(fields) if k != "Signature").encode("utf-8") + body
    return base64.b64encode(hmac.new(secret.encode("utf-8"), content, hashlib.sha1).digest()).decode()


def test_signature_matches_the_definition_with_body_token_and_unicode() -> None:
    cmd = RemotingCommand(RequestCode.SEND_MESSAGE_V2, {"b": "Orders", "a": "PG", "i": "KEYS\x01k-1\x02TAGS\x01Ä"},
                          body=b"\x00\xffpayload")
    ClientSecurity("AK1", "s3cret-é", "tok").sign(cmd)
    assert cmd.ext_fields["AccessKey"] == "AK1" and cmd.ext_fields["SecurityToken"] == "tok"
    expected = definition({"a": "PG", "b": "Orders", "i": "KEYS\x01k-1\x02TAGS\x01Ä", "AccessKey": "AK1",
                           "SecurityToken": "tok"}, b"\x00\xffpayload", "s3cret-é")
    assert cmd.ext_fields["Signature"] == expected
    # a fixed value, so a change of the definition itself shows: computed once from the lines above
    fixed = RemotingCommand(RequestCode.PULL_MESSAGE, {"topic": "T", "consumerGroup": "G"}, body=None)
    ClientSecurity("ak", "sk").sign(fixed)
    assert fixed.ext_fields["Signature"] == base64.b64encode(
        hmac.new(b"sk", b"akGT", hashlib.sha1).digest()).decode()
    assert "SecurityToken" not in fixed.ext_fields


def test_signing_again_gives_the_same_fields_and_no_credentials_sign_nothing() -> None:
    cmd = RemotingCommand(RequestCode.HEART_BEAT, {}, body=b'{"clientID":"x"}')
    sec = ClientSecurity("ak", "sk")
    sec.sign(cmd)
    first = dict(cmd.ext_fields)
    sec.sign(cmd)  # a request re-sent to the next name server
    assert cmd.ext_fields == first
    plain = RemotingCommand(RequestCode.HEART_BEAT, {"x": "1"})
    ClientSecurity().sign(plain)
    assert plain.ext_fields == {"x": "1"}


def test_unique_key_flag_is_left_out_as_brokers_check_it() -> None:
    cmd = RemotingCommand(RequestCode.QUERY_MESSAGE, {"topic": "T", "key": "K", "_UNIQUE_KEY_QUERY": "true"})
    ClientSecurity("ak", "sk").sign(cmd)
    broker_view = {k: v for k, v in cmd.ext_fields.items() if k != "_UNIQUE_KEY_QUERY"}
    assert cmd.ext_fields["Signature"] == definition(broker_view, b"", "sk")
    assert cmd.ext_fields["_UNIQUE_KEY_QUERY"] == "true"  # still sent


def _signed_requests(scenario: str) -> list[captures.CapturedFrame]:
    return [f for f in captures.load(scenario)
            if f["dir"] == "c2s" and "Signature" in (f["header"].get("extFields") or {})]


@requires_captures
def test_apache_mqadmin_signatures_are_reproduced() -> None:
    """mqadmin 4.9.8 signed with AccessKey rocketmq2 and the tools' default secret 12345678."""
    frames = _signed_requests("g")
    assert len(frames) > 50
    checked = 0
    for f in frames:
        ext = {k: str(v) for k, v in f["header"]["extFields"].items()}
        assert ext["AccessKey"] == "rocketmq2"
        # the secret is right: the definition reproduces what mqadmin sent (the flag included, as Java does)
        assert definition(ext, f.body, "12345678") == ext["Signature"], f
        fields = {k: v for k, v in ext.items() if k not in ("AccessKey", "Signature")}
        cmd = RemotingCommand(f["code"], fields, body=f.body or None)
        ClientSecurity("rocketmq2", "12345678").sign(cmd)
        if "_UNIQUE_KEY_QUERY" in fields:
            # Java signs the flag and brokers do not check it (apache/rocketmq#5310): ours is the broker's view
            assert cmd.ext_fields["Signature"] != ext["Signature"]
            assert cmd.ext_fields["Signature"] == definition(
                {k: v for k, v in ext.items() if k != "_UNIQUE_KEY_QUERY"}, f.body, "12345678")
        else:
            assert cmd.ext_fields["Signature"] == ext["Signature"], f
            checked += 1
    assert checked > 50


@requires_captures
def test_apache_cpp_client_signatures_are_reproduced() -> None:
    """The C++ client signs every request with an empty access key and secret (its defaults)."""
    frames = _signed_requests("f")
    assert len(frames) > 20
    for f in frames:
        ext = {k: str(v) for k, v in f["header"]["extFields"].items()}
        fields = {k: v for k, v in ext.items() if k not in ("AccessKey", "Signature")}
        cmd = RemotingCommand(f["code"], fields, body=f.body or None)
        # ClientSecurity refuses an empty key as a setting; the signer itself signs as the C++ client does
        acl_sign.sign(cmd, "", "")
        assert cmd.ext_fields["Signature"] == ext["Signature"], f


def test_secrets_never_in_repr_or_describe_and_it_pickles() -> None:
    sec = ClientSecurity("AKID", "TOPSECRET", "TOKENVALUE", tls=True, tls_ca_file="/ca.pem")
    for text in (repr(sec), str(sec), sec.describe()):
        assert "TOPSECRET" not in text and "TOKENVALUE" not in text
    assert "AKID" in sec.describe() and "/ca.pem" in sec.describe()
    assert pickle.loads(pickle.dumps(sec)) == sec


@pytest.mark.parametrize("kwargs, words", [
    ({"access_key": "ak"}, "secret_key is not"),
    ({"secret_key": "sk"}, "access_key is not"),
    ({"access_key": "ak", "secret_key": "sk", "tls_ca_file": "/x"}, "tls_ca_file given without tls"),
    ({"tls": True, "tls_key_file": "/k"}, "tls_cert_file is not"),
])
def test_incomplete_settings_are_refused_by_name(kwargs: dict, words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        ClientSecurity(**kwargs)


def test_unreadable_ca_file_is_named(tmp_path) -> None:
    missing = tmp_path / "nope.pem"
    with pytest.raises(ConfigError, match=f"tls_ca_file='{missing}' cannot be loaded"):
        ClientSecurity(tls=True, tls_ca_file=str(missing)).ssl_context()
