"""The address the embedded broker registers with the name server (``--advertise-host``)."""

from __future__ import annotations

import pytest

from rmqrun.broker.advertise import default_advertise_host
from rmqrun.broker.app import make_config
from rmqrun.broker.config import BrokerConfig
from rmqrun.broker.store.config import FlushMode


@pytest.mark.parametrize("bind, addresses, expected", [
    ("10.1.2.3", ["192.168.0.5"], "10.1.2.3"),                          # a concrete bind address is itself
    ("0.0.0.0", ["127.0.0.1", "169.254.1.1", "192.168.0.5", "10.0.0.9"], "192.168.0.5"),  # first non-loopback
    ("", ["127.0.0.1", "10.0.0.9"], "10.0.0.9"),
    ("0.0.0.0", ["127.0.0.1"], "127.0.0.1"),                            # nothing else: loopback
    ("0.0.0.0", [], "127.0.0.1"),
])
def test_default_advertise_host(bind: str, addresses: list[str], expected: str) -> None:
    assert default_advertise_host(bind, addresses) == expected


def test_config_resolves_and_checks_it(tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert BrokerConfig(tmp_path).store_host == "127.0.0.1"
    assert BrokerConfig(tmp_path, host="0.0.0.0", advertise_host="10.9.8.7").store_host == "10.9.8.7"
    assert BrokerConfig(tmp_path, host="0.0.0.0").store_host not in ("0.0.0.0", "")
    with pytest.raises(ValueError, match="advertise_host='my host' is not an IP address"):
        BrokerConfig(tmp_path, advertise_host="my host")
    # the store's settings, given by name like the broker's, land in the one StoreConfig the broker holds
    assert make_config(tmp_path, delete_when="4;16").store.delete_when == "4;16"
    assert BrokerConfig(tmp_path).store.flush_mode is FlushMode.SYNC  # the embedded broker's own default
    with pytest.raises(ValueError, match="delete_when='x'"):
        make_config(tmp_path, delete_when="x")
    with pytest.raises(ValueError, match="disk_max_used_space_ratio"):
        make_config(tmp_path, disk_max_used_space_ratio=100)
