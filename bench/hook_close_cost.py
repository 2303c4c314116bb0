"""The ledger write and the connection closes of one act-hook call, in process (issue 25): run from the repository root."""

import json
import os
import statistics
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.getcwd())
from bench import hook_speed as hs
from geode.delivery import hook
from geode.delivery.index import Index
from geode.kernel.config import load_settings
from geode.records.models import init_db

m = hs.generate_store(10000, 7, 1, 240)
tmp = tempfile.mkdtemp()
home = os.path.join(tmp, "h")
os.makedirs(home)
open(os.path.join(home, "geode.toml"), "w").write(f"[domains]\nmain = {json.dumps(m['root'])}\n")
env = {"GEODE_HOME": home, "GEODE_WITHHOLD_RATE": "0.1"}
s = load_settings(env=env)
i = Index(s)
i.ensure()
i.close()
init_db(s).dispose()
res = {"flush": [], "ledger_close": [], "index_close": []}
for _k in range(30):
    data = json.loads(hs.event_json(hs.COMMON_COMMAND, tmp))
    data["session_id"] = uuid.uuid4().hex
    h = hook.HookRun("claude", data, env)
    h.ready()
    h.pre_tool_use()
    t = time.perf_counter()
    h.d.flush()
    res["flush"].append(time.perf_counter() - t)
    t = time.perf_counter()
    h.d.close()
    res["ledger_close"].append(time.perf_counter() - t)
    t = time.perf_counter()
    h.idx.close()
    res["index_close"].append(time.perf_counter() - t)
print({k: round(statistics.median(v) * 1000, 2) for k, v in res.items()})
