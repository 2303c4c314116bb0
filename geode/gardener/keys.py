"""What the Gardener's four rules share: the key a proposal is filed under and the stamps of
ledger time.

``proposal_key(rule, domain, path)`` is ``rule:domain:path`` (hashed past 255 characters): the
queue files a ``(run_id, key)`` once, and the run reads the keys it filed before to hold a
proposal that is pending, conflicting, failed or rejected. Apart so that each rule's module
(``stubs``, ``never_fired``, ``bind``, ``salience``) imports these from one place and none
imports another rule or the run.
"""

from __future__ import annotations

import datetime as _dt
import hashlib

DAY = 86400.0


def iso_stamp(ts: float) -> str:
    return _dt.datetime.fromtimestamp(ts, _dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if ts else "-"


def day_stamp(ts: float) -> str:
    return _dt.datetime.fromtimestamp(ts, _dt.UTC).strftime("%Y-%m-%d")


def proposal_key(rule: str, domain: str, path: str) -> str:
    key = f"{rule}:{domain}:{path}"
    if len(key) > 255:
        key = f"{rule}:" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
    return key
