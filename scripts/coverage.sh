#!/usr/bin/env bash
# Line coverage of rmqrun across processes, reported per package.
#
#   scripts/coverage.sh                       # the default suite (tests/ -m "not slow")
#   scripts/coverage.sh tests/unit -k store   # any pytest arguments: a subset
#
# The tests start worker processes, `rmqrun run` and brokers as children; coverage's
# subprocess patch (scripts/coveragerc) measures those too, and `coverage combine`
# merges every process's data. A process killed with SIGKILL (some tests do that on
# purpose) saves nothing, so its lines count only if another process ran them.
# Needs the `coverage` extra: pip install -e '.[test,coverage]' (and `spark` for rmqrun/spark:
# without PySpark the Spark tests skip and that package counts as mostly unrun).
# Writes .coverage (combined data) and prints the per-package table; the exit status
# is pytest's.
set -uo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
[ -x "$PY" ] || PY=python3
"$PY" -c "import coverage" 2>/dev/null || { echo "coverage is not installed: pip install -e '.[test,coverage]'" >&2; exit 2; }

export COVERAGE_FILE="$PWD/.coverage"
export COVERAGE_RCFILE="$PWD/scripts/coveragerc"
rm -f .coverage .coverage.*
# Spark's Python workers are started by the JVM with this environment (the venv's python and
# coverage's start-up hook), so they are measured; but reused workers are still alive when the
# session stops and end without saving (rmqrun/spark/batch.py read 0% that way). One worker
# per task exits normally and saves its data.
export PYSPARK_SUBMIT_ARGS="${PYSPARK_SUBMIT_ARGS:---conf spark.python.worker.reuse=false pyspark-shell}"

if [ $# -eq 0 ]; then set -- tests -m "not slow"; fi  # the default suite, as CI runs it
"$PY" -m coverage run -m pytest -q -p no:cacheprovider "$@"
status=$?

"$PY" -m coverage combine -q
"$PY" - <<'PYEOF'
"""Per package (directory under rmqrun/) statements, missed lines and line coverage."""
from collections import defaultdict
from pathlib import Path

import coverage

cov = coverage.Coverage()
cov.load()
root = Path("rmqrun").resolve()
totals: dict[str, list[int]] = defaultdict(lambda: [0, 0])
for path in sorted(root.rglob("*.py")):
    try:
        _, statements, _, missing, _ = cov.analysis2(str(path))
    except coverage.CoverageException:
        continue
    if not statements:
        continue
    package = str(path.parent.relative_to(root.parent))
    totals[package][0] += len(statements)
    totals[package][1] += len(missing)
width = max(len(p) for p in totals)
print(f"\n{'package':{width}}  {'stmts':>6}  {'miss':>6}  {'cover':>6}")
all_s = all_m = 0
for package, (s, m) in sorted(totals.items()):
    all_s += s
    all_m += m
    print(f"{package:{width}}  {s:6d}  {m:6d}  {100 * (s - m) / max(s, 1):5.1f}%")
print(f"{'TOTAL':{width}}  {all_s:6d}  {all_m:6d}  {100 * (all_s - all_m) / max(all_s, 1):5.1f}%")
PYEOF
exit $status
