"""The soft time limit is per handler call, armed at each call's start (issue #23, item 2).

A worker process runs a batch whose first call takes most of the limit in Python and
whose second call blocks in C (``libc.sleep`` through ctypes: a signal interrupts it for
good). Armed once per batch, the timer fired at the first call's deadline, in the middle
of the second call: the C sleep returned early, the call ended before its own limit as a
success, and no warning was logged. Armed per call, the second call is interrupted at its
own deadline, fails, and the warning names it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.test_pool_basic import C, O, S, Harness, records, run, statuses

HANDLER = "tests.integration.handlers.cblock_handler:handle"
LIMIT = 2.0
FIRST = 1.2  # the first call's Python time: its own limit is far, a batch-wide one would fire 0.8 s into the next


def _times(path: Path) -> dict[int, tuple[float, str]]:
    """offset -> (how long its call took, how it ended)."""
    out = {}
    for line in path.read_text().splitlines():
        offset, start, end, how = line.split()
        out[int(offset)] = (float(end) - float(start), how)
    return out


@pytest.mark.parametrize("mode, failed", [(C, S.RECONSUME_LATER), (O, S.SUSPEND)])
def test_a_call_blocked_in_c_is_cut_at_its_own_deadline_not_the_previous_calls(
        mode, failed, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    times = tmp_path / "times.txt"
    monkeypatch.setenv("RMQRUN_HANDLER_TIMES_FILE", str(times))

    async def scenario() -> None:
        async with Harness(HANDLER, time_limit=LIMIT, kill_grace=30) as h:
            batch = h.submit(0, records([{"DO": f"python:{FIRST}"}, {"DO": "cblock"}, {}], start=40), mode)
            result = await h.result(batch, timeout=30)
            assert statuses(result) == [S.SUCCESS, failed, S.NOT_RUN]
            assert result.timed_out and f"soft time limit ({LIMIT:g} s) exceeded" in (result.error or "")
            assert not h.lost  # the soft limit ended it, not the hard one
    run(scenario())
    took = _times(times)
    assert took[40][1] == "ok" and took[40][0] >= FIRST
    blocked, how = took[41]
    assert how == "SoftTimeLimitExceeded", took
    assert abs(blocked - LIMIT) <= 0.1 * LIMIT, f"the blocked call was cut after {blocked:.3f} s, not {LIMIT} s"
    assert 42 not in took
    err = capfd.readouterr().err
    assert f"soft time limit ({LIMIT:g} s) exceeded (queue offset 41)" in err, err[-3000:]
