"""``rmqrun run`` as a process: settings from every source, logs in both formats, handlers from the cwd."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

from tests.integration.cli_kit import RMQRUN, Child, child_env, embedded_broker, produce, run_args, run_cli, wait_for


def test_print_settings_merges_file_env_and_flags_in_a_real_process(tmp_path: Path) -> None:
    cfg = tmp_path / "app.yaml"
    cfg.write_text("workers: 3\npull-batch-size: 8\ngroup: from_file\nlog_level: DEBUG\n")
    env = child_env(RMQRUN_PULL_BATCH_SIZE="16", RMQRUN_GROUP="from_env", RMQRUN_HANDLER_WHATEVER="ignored")
    proc = run_cli(["run", "app:handle", "--config", str(cfg), "--group", "from_flag", "--print-settings"], env=env)
    assert proc.returncode == 0, proc.stderr
    rows = {line.split()[0]: line.split(None, 2)[1:] for line in proc.stdout.splitlines()
            if line.startswith("  ") and line.split()}
    assert rows["workers"] == ["3", f"config file {cfg}"]
    assert rows["pull_batch_size"] == ["16", "environment RMQRUN_PULL_BATCH_SIZE"]
    assert rows["group"] == ["from_flag", "command line --group"]
    assert rows["log_level"] == ["DEBUG", f"config file {cfg}"]
    assert rows["handler"] == ["app:handle", "command line"]
    assert rows["kill_grace"] == ["10.0", "default"]


def test_help_settings_lists_every_key() -> None:
    from rmqrun.cli.settings import SETTINGS
    proc = run_cli(["run", "--help-settings"])
    assert proc.returncode == 0
    for s in SETTINGS:
        assert f"  {s.key} " in proc.stdout and s.env in proc.stdout


def test_unknown_variable_stops_before_anything_starts(tmp_path: Path) -> None:
    proc = run_cli(["run", "workers.noop:handle", "--namesrv", "127.0.0.1:1", "--group", "G", "--topic", "T"],
                   env=child_env(RMQRUN_WROKERS="4"), timeout=20)
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("rmqrun: error: unknown setting RMQRUN_WROKERS in the environment; did you mean "
                                   "RMQRUN_WORKERS, RMQRUN_WORKER_CLASS? (a handler's own variables must start with RMQRUN_HANDLER_)")


def test_invalid_flag_value_is_one_line_and_exit_2() -> None:
    proc = run_cli(["run", "workers.noop:handle", "--namesrv", "nohost", "--group", "G", "--topic", "T"])
    assert proc.returncode == 2
    assert proc.stderr.startswith("rmqrun: error: namesrv='nohost' (command line --namesrv) is invalid: host:port")
    assert "Traceback" not in proc.stderr


def test_json_logs_carry_worker_id_and_pid(tmp_path: Path) -> None:
    with embedded_broker(tmp_path) as eb:
        produce(eb.namesrv_address, "JL", 3)
        args = run_args(eb.namesrv_address, "GJL", "JL", "workers.noop:handle", "--workers", "2",
                        "--log-format", "json", "--log-level", "DEBUG")
        with Child(args, tmp_path) as child:
            child.wait_output('"consuming JL[*] as group GJL')
            wait_for(lambda: child.stderr.count('"worker_id"') >= 2, 20, "both workers' log lines")
            child.signal(signal.SIGTERM)
            assert child.wait(30) == 0
    records = [json.loads(line)["record"] for line in child.stderr.splitlines() if line.strip()]
    assert records, "every line is one JSON object"
    supervisor = [r for r in records if r["extra"].get("role") == "supervisor"]
    workers = [r for r in records if "worker_id" in r["extra"]]
    assert supervisor and all(r["process"]["id"] == child.pid for r in supervisor)
    assert {r["extra"]["worker_id"] for r in workers} == {0, 1}
    for r in workers:
        assert r["extra"]["pid"] == r["process"]["id"] != child.pid
    assert any(r["message"].startswith("stopped: 3 messages consumed") for r in supervisor)


def test_text_logs_and_a_handler_module_from_the_working_directory(tmp_path: Path) -> None:
    app = tmp_path / "app"
    app.mkdir()
    out = tmp_path / "seen.txt"
    (app / "myhandler.py").write_text(
        "import os\n\n"
        "def handle(msg):\n"
        "    with open(os.environ['RMQRUN_HANDLER_OUT'], 'a') as f:\n"
        "        f.write(msg.body.decode() + '\\n')\n")
    with embedded_broker(tmp_path) as eb:
        produce(eb.namesrv_address, "TL", 5)
        args = run_args(eb.namesrv_address, "GTL", "TL", "myhandler:handle", "--workers", "1", "--log-level", "DEBUG")
        env = child_env(RMQRUN_HANDLER_OUT=str(out))
        env.pop("PYTHONPATH")
        proc = subprocess.Popen([*RMQRUN, *args], cwd=app, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        try:
            wait_for(lambda: out.exists() and len(out.read_text().splitlines()) == 5, 30, "5 messages handled")
        finally:
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
    assert sorted(out.read_text().split()) == [f"m{i}" for i in range(5)]
    assert " | supervisor | consuming TL[*] as group GTL" in err
    assert " | worker 0 pid " in err and "ready: handler myhandler:handle" in err


def test_broker_port_in_use_is_one_line(tmp_path: Path) -> None:
    import socket
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = run_cli(["broker", "--data-dir", str(tmp_path / "data"), "--namesrv-port", "0",
                        "--broker-port", str(port)], timeout=30)
    assert proc.returncode == 1
    assert "rmqrun: error: cannot start the broker:" in proc.stderr and "address already in use" in proc.stderr
    assert "Traceback" not in proc.stderr
