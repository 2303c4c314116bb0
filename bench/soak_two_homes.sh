#!/bin/sh
# Soak the two-homes race (issue 15, point 1) longer than CI does: RUNS races (default 200) of
# two `geode proposals approve` processes from two homes on one store, each run checking that
# every note holds exactly the bytes its own approved proposal says.
#   bench/soak_two_homes.sh [RUNS]
set -eu
cd "$(dirname "$0")/.."
GEODE_SOAK_RUNS="${1:-${GEODE_SOAK_RUNS:-200}}" PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" \
  exec "${PYTHON:-python}" -m pytest -q -p no:cacheprovider tests/test_apply_shared.py
