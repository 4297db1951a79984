"""Mutants of the supervisor's pull path cut in issue #38 (branch ``supcut2``): the one-pass scan of a pull
(``scan_columns``), the store times it hands the statistics and the pipe's DONE decode (entries as in
:mod:`mutant_kit`; joined by :mod:`mutants_table`). Kept apart from :mod:`mutants_consumer` so each table stays
under the 600-line limit.
"""

from __future__ import annotations

from mutant_kit import U, Mutant, m

MUTANTS: list[Mutant] = [
    # ---------------------------------------------------------------- the supervisor's pull path (#38, supcut2)
    m("sup2-scan-v6-stamp-misread", "rmqrun/remoting/message.py",
      "the one-pass scan reads an IPv6 born host's store time where an IPv4 one's sits: the wait histogram "
      "counts garbage for those records",
      "                p = pos + store_timestamp_pos(sys_flag)\n                (stamp,) = unpack_long(body, p)",
      "                p = pos + store_timestamp_pos(0)\n                (stamp,) = unpack_long(body, p)\n"
      "                p = pos + store_timestamp_pos(sys_flag)",
      U + "remoting/test_scan_columns.py"),
    m("sup2-scan-props-unchecked", "rmqrun/remoting/message.py",
      "the one-pass scan no longer checks that a record's fields add up to its total size: a damaged pull is "
      "cached as messages instead of refused",
      "            if props_len < 0 or p + 2 + props_len != end:",
      "            if props_len < 0:",
      U + "remoting/test_scan_columns.py"),
    m("sup2-cc-stats-wrong-column", "rmqrun/consumer/consume_concurrently.py",
      "a concurrent whole-pull job hands the statistics its body sizes as store times",
      "        stored = entries.stamps if isinstance(entries, QueuedRun) else None",
      "        stored = entries.sizes if isinstance(entries, QueuedRun) else None",
      U + "consumer/test_pull_store_times.py"),
    m("sup2-orderly-stats-wrong-column", "rmqrun/consumer/consume_orderly.py",
      "an orderly whole-pull job hands the statistics its body sizes as store times",
      "                                 taken.stamps if isinstance(taken, QueuedRun) else None)",
      "                                 taken.sizes if isinstance(taken, QueuedRun) else None)",
      U + "consumer/test_pull_store_times.py"),
    m("sup2-done-offsets-as-delays", "rmqrun/pipe/wire.py",
      "a DONE frame's queue offsets are read with the delay levels' width",
      "    return struct.Struct(f\">{n}h\").unpack_from, struct.Struct(f\">{n}q\").unpack_from",
      "    return struct.Struct(f\">{n}h\").unpack_from, struct.Struct(f\">{n}h\").unpack_from",
      U + "pipe"),
]
