"""Kafka's offsets-behind metrics from a progress of the rocketmq source, without a JVM."""

from __future__ import annotations

import json

from rmqrun.spark.lag import AVG, MAX, MIN, offsets_behind


def test_offsets_behind_per_queue_latest_minus_end_under_kafkas_names() -> None:
    end = {"T": {"broker-a:0": 10, "broker-a:1": 4}}
    latest = {"T": {"broker-a:0": 10, "broker-a:1": 9, "broker-a:2": 3}}  # queue 2 not read yet: 3 behind
    progress = {"sources": [{"description": "other", "endOffset": "7", "latestOffset": None},
                            {"endOffset": json.dumps(end), "latestOffset": json.dumps(latest)}]}
    assert offsets_behind(progress) == {MIN: "0", MAX: "5", AVG: "2.7"}
    assert offsets_behind(None) is None and offsets_behind({"sources": []}) is None
    assert offsets_behind({"sources": [{"endOffset": json.dumps(end), "latestOffset": None}]}) is None
