"""The supervisor process's collector settings (``rmqrun/cli/run/collector.py``, issue #32): what exists once the
supervisor is built is frozen out of the collector's walks, and the youngest generation is collected every
``GEN0_THRESHOLD`` container allocations (a POP consumer allocates a few per message; at CPython's 700 a no-op
drain spent about an eighth of the supervisor's CPU in collections that found nothing)."""

from __future__ import annotations

import gc

from rmqrun.cli.run import collector


def test_settle_freezes_what_exists_and_raises_the_first_threshold_only() -> None:
    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        kept = [object(), {"a": 1}]  # a container that exists before: frozen with the rest
        collector.settle()
        assert gc.get_threshold() == (collector.GEN0_THRESHOLD, 10, 10)
        assert gc.get_freeze_count() > 0
        assert collector.GEN0_THRESHOLD > 700
        # a higher threshold set by someone else is kept
        gc.set_threshold(collector.GEN0_THRESHOLD * 2, 5, 5)
        collector.settle()
        assert gc.get_threshold() == (collector.GEN0_THRESHOLD * 2, 5, 5)
        assert kept
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)


def test_the_run_command_settles_the_collector_once_the_supervisor_exists() -> None:
    """The call sits after the supervisor is built (its modules and objects then exist to be frozen)."""
    import inspect

    from rmqrun.cli.run import command
    source = inspect.getsource(command._run)
    assert source.index("Supervisor(settings)") < source.index("collector.settle()") < source.index(
        "supervisor.run()")
