"""Ports handed to a broker under test are never the same twice.

The kernel hands a port out again once its probe socket is closed (about 7 in 100 of 2,000 probes in a row
repeat an earlier one on Linux), and a broker given the same port for its name server and its broker fails
to bind the second: a CI run failed on exactly that. Both helpers that pick ports for brokers are pinned.
"""
from __future__ import annotations

import sys
from pathlib import Path

from tests.integration.cli_kit import free_port

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))
import readme_check  # noqa: E402


def test_the_test_kit_never_hands_out_a_port_twice() -> None:
    ports = [free_port() for _ in range(2000)]
    assert len(set(ports)) == len(ports)


def test_the_readme_check_picks_different_ports_for_name_server_and_broker() -> None:
    for _ in range(500):
        ns_port, broker_port = readme_check.free_ports(2)
        assert ns_port != broker_port
