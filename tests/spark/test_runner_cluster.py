"""``rmqrun spark --master spark://...`` on a real Spark standalone cluster (not local mode).

A master and a worker are started from the PySpark installation itself (``bin/spark-class``, the pip
package has no ``sbin`` scripts), bound to 127.0.0.1 with free ports for the RPC endpoints and the web UIs,
and torn down after the test; no JVM of theirs, executors included, may outlive it. The handler module sits
in the command's working directory only, so it reaches the executors solely through the runner's shipping.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

import psutil
import pytest

from tests.integration.cli_kit import child_env, free_port, produce, run_cli, wait_for
from tests.integration.signals_kit import topic_messages

pytestmark = pytest.mark.timeout(240)
HANDLER_SRC = Path(__file__).with_name("backfill_handler.py")


def _spark_class() -> Path:
    import pyspark
    return Path(pyspark.__file__).parent / "bin" / "spark-class"


class _Daemon:
    """One spark-class JVM with its log in a file (spark-class execs java, so the pid is the JVM's)."""

    def __init__(self, args: list[str], log: Path, env: dict[str, str]) -> None:
        self.log = log
        with open(log, "wb") as out:
            self.proc = subprocess.Popen([str(_spark_class()), *args], stdout=out, stderr=subprocess.STDOUT,
                                         env=env, start_new_session=True)

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_log(self, fragment: str, timeout: float = 90.0) -> None:
        def seen() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"spark daemon exited with {self.proc.returncode}:\n{self.text()[-3000:]}")
            return fragment in self.text()
        wait_for(seen, timeout, what=f"{fragment!r} in {self.log.name}", interval=0.2)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A standalone master + one worker (2 cores) on loopback; yields the master URL and the worker's ports."""
    env = child_env(SPARK_LOCAL_IP="127.0.0.1", SPARK_LOG_DIR=str(tmp_path / "spark-logs"),
                    SPARK_WORKER_DIR=str(tmp_path / "spark-work"))
    mport, mui, wport, wui = free_port(), free_port(), free_port(), free_port()
    master = _Daemon(["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(mport),
                      "--webui-port", str(mui)], tmp_path / "master.log", env)
    daemons = [master]
    try:
        master.wait_log("I have been elected leader")
        worker = _Daemon(["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--port", str(wport),
                          "--webui-port", str(wui), "--cores", "2", "--memory", "1g",
                          "--work-dir", str(tmp_path / "spark-work"), f"spark://127.0.0.1:{mport}"],
                         tmp_path / "worker.log", env)
        daemons.append(worker)
        worker.wait_log("Successfully registered with master")
        yield {"url": f"spark://127.0.0.1:{mport}", "ports": (mport, wport), "worker": worker}
    finally:
        for d in reversed(daemons):
            d.stop()
        ports = [f"127.0.0.1:{p}" for p in (mport, wport)]

        def orphans() -> list[int]:
            found = []
            for p in psutil.process_iter(["pid", "cmdline"]):
                line = " ".join(p.info["cmdline"] or [])
                if any(port in line for port in ports):
                    found.append(p.info["pid"])
            return found
        wait_for(lambda: not orphans(), timeout=30, what="no JVM of the test cluster left (master, worker, "
                                                          "executors)")


def test_backlog_on_a_standalone_cluster_is_handled_once(broker: Any, cluster: dict[str, Any],
                                                         tmp_path: Path) -> None:
    work = tmp_path / "cwd"
    (work / "rec").mkdir(parents=True)
    shutil.copy(HANDLER_SRC, work / "backfill_handler.py")
    produce(broker.namesrv_address, "SparkRunCluster", 80)
    bodies = {m.body.decode() for m in topic_messages(broker, "SparkRunCluster")}
    assert len(bodies) == 80

    rec = str(work / "rec")
    res = run_cli(["spark", "backfill_handler:handle", "--namesrv", broker.namesrv_address,
                   "--topic", "SparkRunCluster", "--master", cluster["url"], "--partitions", "4",
                   "--worker-init", "backfill_handler:init", "--failed-to", str(work / "failed.jsonl"),
                   "--conf", "spark.ui.enabled=false", "--conf", "spark.executor.memory=512m",
                   "--conf", f"spark.executorEnv.RMQRUN_HANDLER_RECORD_DIR={rec}",
                   "--conf", "spark.executorEnv.RMQRUN_HANDLER_FAIL=m11"],
                  cwd=work, timeout=180, env=child_env(RMQRUN_HANDLER_RECORD_DIR=rec))
    assert res.returncode == 0, res.stderr[-3000:]
    seen = [line.split() for f in (work / "rec").glob("handled-*") for line in f.read_text().splitlines()]
    assert Counter(r[2] for r in seen) == Counter(bodies), "every message exactly once"
    assert "79 succeeded, 1 failed" in res.stdout
    assert '"body": "m11"' in (work / "failed.jsonl").read_text()
    # It really ran on the cluster: the worker launched an executor for this app.
    assert "Asked to launch executor" in cluster["worker"].text()
