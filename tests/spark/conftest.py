"""Fixtures of the Spark data source tests: one local Spark session for the whole run, embedded brokers.

The whole directory is skipped, with one reason, only when pyspark or java is
missing; CI installs the ``spark`` extra and has Java, so the tests run there.
A session takes seconds to start and its first Python data-source query more,
so every test shares one ``local[2]`` session and keeps its data small.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.integration.signals_kit import start_broker


def _missing() -> str | None:
    try:
        import pyspark  # noqa: F401
        import pyarrow  # noqa: F401
    except ImportError as e:
        return f"Spark tests need the spark extra: pip install -e '.[test,spark]' ({e})"
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "Spark tests need Java 17+ (no `java` on PATH, no $JAVA_HOME)"
    return None


_WHY = _missing()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.spark)
            if _WHY:
                item.add_marker(pytest.mark.skip(reason=_WHY))


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A ``local[2]`` SparkSession with the ``rocketmq`` source registered, shared by all Spark tests."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import rmqrun.spark

    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    session = (SparkSession.builder.master("local[2]").appName("rmqrun-spark-tests")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.default.parallelism", "2")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.sql.warehouse.dir", str(warehouse))
               .config("spark.sql.streaming.forceDeleteTempCheckpointLocation", "true")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    rmqrun.spark.register(session)
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """An embedded name server + broker on a thread, shared by one test module (topics keep tests apart)."""
    b = start_broker(tmp_path_factory.mktemp("spark-broker"))
    try:
        yield b
    finally:
        b.stop_in_thread()
