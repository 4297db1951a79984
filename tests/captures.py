"""Access to the frames captured from Apache RocketMQ 4.9.8, kept in ``tests/data/protocol/``.

The captures are real traffic between a real Apache RocketMQ 4.9.8 name server and broker and
the Apache Java and C++ clients (``tests/data/protocol/README.md`` says how they were made).
They travel with the repository so that every clone runs every conformance test: a missing
file is a failure, never a skip. ``CAPTURES_DIR`` points the tests at another copy.
"""

from __future__ import annotations

import base64
import json
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator

import pytest

PROTOCOL_DIR = Path(os.environ.get("CAPTURES_DIR", Path(__file__).resolve().parent / "data" / "protocol"))

SCENARIOS = {
    "a": "scenario_a_producer",
    "b": "scenario_b_push_concurrently",
    "c": "scenario_c_push_orderly",
    "d": "scenario_d_pull",
    "e": "scenario_e_push_rocketmq_serialize",
    "f": "scenario_f_cpp_client",
    "g": "scenario_g_admin",
}


@dataclass(frozen=True)
class CapturedFrame:
    scenario: str
    record: dict[str, Any]

    @property
    def seq(self) -> int:
        return int(self.record["seq"])

    @property
    def raw(self) -> bytes:
        return base64.b64decode(self.record["frame_b64"])

    @property
    def body(self) -> bytes:
        b = self.record.get("body_b64")
        return base64.b64decode(b) if b else b""

    @property
    def header_bytes(self) -> bytes:
        return base64.b64decode(self.record["header_b64"])

    def __getitem__(self, key: str) -> Any:
        return self.record[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.record.get(key, default)

    def __repr__(self) -> str:
        return f"<{self.scenario}#{self.seq} {self.record['kind']} {self.record['code_name']}>"


#: Marks the tests that read the captures (``-m captures`` selects them). It skips nothing: the files ship with the
#: repository, and a test that cannot open them fails with the path it tried.
requires_captures = pytest.mark.captures


@lru_cache(maxsize=None)
def load(scenario: str) -> tuple[CapturedFrame, ...]:
    """Every frame of one scenario (key 'a'..'g' or the file's base name)."""
    name = SCENARIOS.get(scenario, scenario)
    key = next((k for k, v in SCENARIOS.items() if v == name), scenario)
    with open(PROTOCOL_DIR / f"{name}.jsonl", encoding="utf-8") as fh:
        return tuple(CapturedFrame(key, json.loads(line)) for line in fh if line.strip())


def all_frames() -> Iterator[CapturedFrame]:
    for key in SCENARIOS:
        yield from load(key)


def requests(code: int, scenario: str | None = None) -> list[CapturedFrame]:
    frames = load(scenario) if scenario else all_frames()
    return [f for f in frames if f["kind"] == "request" and f["code"] == code]


def responses_to(code: int, scenario: str | None = None) -> list[CapturedFrame]:
    frames = load(scenario) if scenario else all_frames()
    return [f for f in frames if f["kind"] == "response" and f.get("request_code") == code]


def request_of(response: CapturedFrame) -> CapturedFrame | None:
    seq = response.get("reply_to_seq")
    if seq is None:
        return None
    return load(response.scenario)[seq]
