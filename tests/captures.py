"""Access to the frames captured from Apache RocketMQ 4.9.8 in ../shared/protocol/.

Tests read them where they lie (they are never copied or edited). When the
folder is missing the tests that need it are skipped with the reason, so a
checkout without ``shared/`` still runs the rest.
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

PROTOCOL_DIR = Path(os.environ.get(
    "CAPTURES_DIR", Path(__file__).resolve().parent.parent.parent / "shared" / "protocol"))

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


def available() -> bool:
    return all((PROTOCOL_DIR / f"{name}.jsonl").is_file() for name in SCENARIOS.values())


requires_captures = pytest.mark.skipif(not available(), reason=f"captured frames not found in {PROTOCOL_DIR}")


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
