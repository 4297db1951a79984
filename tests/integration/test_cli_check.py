"""``rmqrun check`` against a real embedded broker: exit 0 with a report, or the precise problem.

Exit codes: 0 all well, 2 settings, 3 handler/hook, 1 name server/topic/broker.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.cli_kit import child_env, embedded_broker, free_port, produce, run_cli


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    with embedded_broker(tmp_path_factory.mktemp("check")) as eb:
        produce(eb.namesrv_address, "CK", 5)
        yield eb


def check(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None):  # type: ignore[no-untyped-def]
    return run_cli(["check", *args], env=env, cwd=cwd)


def test_all_well(cluster) -> None:  # type: ignore[no-untyped-def]
    proc = check("workers.cpu:handle", "--namesrv", cluster.namesrv_address, "--group", "GCK", "--topic", "CK",
                 "--tags", "A || B", "--workers", "3", "--worker-init", "workers.noop:handle")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "ok    handler      workers.cpu:handle: one message per call" in out
    assert "ok    worker_init  workers.noop:handle" in out
    assert f"ok    name server  {cluster.namesrv_address}" in out
    assert "CK: 4 readable queue(s) on broker-a" in out
    assert f"broker-a at {cluster.broker_address} answers (queue 0 holds offsets up to " in out
    assert "would subscribe to CK [A || B], %RETRY%GCK [*] as group GCK: CLUSTERING, concurrently" in out
    assert "3 worker(s) running workers.cpu:handle" in out
    assert "no member of GCK is online now" in out


def test_config_file_and_environment(cluster, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cfg = tmp_path / "app.yaml"
    cfg.write_text(f"handler: workers.cpu:handle_batch\nnamesrv: 127.0.0.1:1\ngroup: GCK2\ntopic: CK\n"
                   f"consume_message_batch_max_size: 8\norderly: true\n")
    env = child_env(NAMESRV_ADDR=cluster.namesrv_address)  # the environment beats the file
    proc = check("--config", str(cfg), env=env)
    assert proc.returncode == 0, proc.stderr
    assert "workers.cpu:handle_batch: a batch handler (lists of messages)" in proc.stdout
    assert "as group GCK2: CLUSTERING, orderly" in proc.stdout
    # namesrv came from NAMESRV_ADDR (the file's 127.0.0.1:1 would not have answered), the rest from the file
    assert "settings resolved (5 from config file, 1 from environment)" in proc.stdout


def test_pop_mode_is_described_as_the_run_logs_it(cluster) -> None:  # type: ignore[no-untyped-def]
    """check and the start-up log describe the mode with the same words (ConsumerConfig.mode), POP included."""
    proc = check("workers.cpu:handle", "--namesrv", cluster.namesrv_address, "--group", "GCK3", "--topic", "CK",
                 "--consume-mode", "pop", "--orderly")
    assert proc.returncode == 0, proc.stderr
    assert "as group GCK3: CLUSTERING, orderly by POP," in proc.stdout


def test_invalid_setting_is_exit_2(cluster) -> None:  # type: ignore[no-untyped-def]
    proc = check("workers.cpu:handle", "--namesrv", cluster.namesrv_address, "--group", "G", "--topic", "CK",
                 "--workers", "none")
    assert proc.returncode == 2
    assert "FAIL  settings     workers='none' (command line --workers) is invalid: expected an integer" in proc.stdout
    assert proc.stderr == "", "one stream: the report, failed or not, is on stdout"


def test_unknown_variable_is_exit_2(cluster) -> None:  # type: ignore[no-untyped-def]
    proc = check("workers.cpu:handle", "--namesrv", cluster.namesrv_address, "--group", "G", "--topic", "CK",
                 env=child_env(RMQRUN_GRUOP="x"))
    assert proc.returncode == 2
    assert "unknown setting RMQRUN_GRUOP in the environment; did you mean RMQRUN_GROUP?" in proc.stdout


def test_missing_essentials_is_exit_2() -> None:
    proc = check("workers.cpu:handle")
    assert proc.returncode == 2
    assert "missing namesrv (--namesrv or $NAMESRV_ADDR), group (--group), topic (--topic)" in proc.stdout


def test_handler_that_does_not_import_is_exit_3(cluster, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    proc = check("workers.cpu:handel", "--namesrv", cluster.namesrv_address, "--group", "G", "--topic", "CK")
    assert proc.returncode == 3
    assert "did you mean 'workers.cpu:handle'?" in proc.stdout
    # a module of the current directory is found (cwd is on sys.path), and its import error is shown
    (tmp_path / "broken_app.py").write_text("import no_such_dependency_xyz\n\ndef handle(msg):\n    pass\n")
    proc = check("broken_app:handle", "--namesrv", cluster.namesrv_address, "--group", "G", "--topic", "CK",
                 cwd=tmp_path)
    assert proc.returncode == 3
    assert "no_such_dependency_xyz" in proc.stdout
    (tmp_path / "good_app.py").write_text("def handle(msg):\n    pass\n\ndef init():\n    pass\n")
    proc = check("good_app:handle", "--namesrv", cluster.namesrv_address, "--group", "G", "--topic", "CK",
                 "--worker-init", "good_app:nope", cwd=tmp_path)
    assert proc.returncode == 3
    assert "FAIL  worker_init" in proc.stdout and "'nope'" in proc.stdout


def test_batch_size_needs_a_batch_handler(cluster) -> None:  # type: ignore[no-untyped-def]
    proc = check("workers.cpu:handle", "--namesrv", cluster.namesrv_address, "--group", "G", "--topic", "CK",
                 "--batch-size", "4")
    assert proc.returncode == 3
    assert "@rmqrun.batch" in proc.stdout


def test_unreachable_name_server_is_exit_1() -> None:
    port = free_port()  # nothing listens there
    proc = check("workers.cpu:handle", "--namesrv", f"127.0.0.1:{port}", "--group", "G", "--topic", "CK",
                 "--timeout", "2")
    assert proc.returncode == 1
    assert f"FAIL  name server  127.0.0.1:{port}" in proc.stdout


def test_missing_topic_is_exit_1(cluster) -> None:  # type: ignore[no-untyped-def]
    proc = check("workers.cpu:handle", "--namesrv", cluster.namesrv_address, "--group", "G", "--topic", "NoSuchT")
    assert proc.returncode == 1
    assert "FAIL  topic        topic 'NoSuchT' does not exist on the name server" in proc.stdout


def test_a_popping_group_is_refused_where_run_would_be_refused(tmp_path: Path) -> None:
    """A broker without POP (RocketMQ 4.x: no QUERY_ASSIGNMENT, no POP codes) refuses ``--consume-mode pop``:
    ``run`` stops with exit 2 at its first assignment, and ``check`` said 'all well' (seen against a real 4.9.8
    broker). Now check fails the same way; a pulling group on the same broker still passes."""
    from rmqrun.remoting.codes import RequestCode

    with embedded_broker(tmp_path) as eb:
        produce(eb.namesrv_address, "CK4", 2)
        for code in (RequestCode.QUERY_ASSIGNMENT, RequestCode.POP_MESSAGE, RequestCode.ACK_MESSAGE):
            del eb.broker.server.processors[int(code)]
        args = ("workers.noop:handle", "--namesrv", eb.namesrv_address, "--group", "GCK4", "--topic", "CK4")
        proc = check(*args, "--consume-mode", "pop")
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert (f"FAIL  consume mode consume_mode=pop: broker broker-a at {eb.broker_address} does not serve POP"
                in proc.stdout), proc.stdout
        assert "POP needs RocketMQ 5.x; use --consume-mode pull with this cluster" in proc.stdout, proc.stdout
        assert "would subscribe" not in proc.stdout, proc.stdout

        ran = run_cli(["run", *args, "--consume-mode", "pop", "--workers", "1"])
        assert ran.returncode == 2, ran.stderr[-2000:]
        assert "POP needs RocketMQ 5.x" in ran.stderr, ran.stderr[-2000:]

        proc = check(*args)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "would subscribe to CK4 [*]" in proc.stdout, proc.stdout
