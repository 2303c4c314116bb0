#!/bin/sh
# Soak the two-homes races (issue 15, points 1 and 2) longer than CI does, RUNS of each (default
# 200):
# - two `geode proposals approve` processes from two homes on one store, each run checking that
#   every note holds exactly the bytes its own approved proposal says (tests/test_apply_shared.py);
# - two homes on one records database (PostgreSQL at 127.0.0.1:5432, and a shared SQLite file)
#   and one store: home PB's `geode proposals list` and `reconcile` in the middle of home PA's
#   22-file apply must leave it alone, and the store ends all applied, never mixed
#   (tests/test_apply_shared_db.py).
#   bench/soak_two_homes.sh [RUNS]
set -eu
cd "$(dirname "$0")/.."
GEODE_SOAK_RUNS="${1:-${GEODE_SOAK_RUNS:-200}}" PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" \
  exec "${PYTHON:-python}" -m pytest -q -p no:cacheprovider tests/test_apply_shared.py tests/test_apply_shared_db.py
