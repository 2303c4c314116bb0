"""The frontmatter filter language of ``geode search --where``/``--filter``, shared by the
command line and the MCP server's ``where`` argument: one reading of ``key=value`` for both.

Standard library only (``json``): the command line parses its flags before the search's fast
path, which must not pay for ``geode.recall.filters``.
"""

from __future__ import annotations

import json
from typing import Any

#: A filter table as ``geode.recall.search`` takes it: ``{key: value}`` or ``{key: {"$op": value}}``.
Where = dict[str, Any]

_OPS = (">=", "<=", "!=", ">", "<", "~", "=")
_OPNAME = {">=": "$gte", "<=": "$lte", ">": "$gt", "<": "$lt", "!=": "$ne", "~": "$contains"}


def _value(s: str):
    s = s.strip()
    if s.startswith("[") and s.endswith("]"):
        return [_value(x) for x in s[1:-1].split(",") if x.strip()]
    try:
        return int(s)
    except ValueError:
        pass
    try:
        return float(s)
    except ValueError:
        return s.strip("\"'")


def parse_where(items: list[str] | None, filter_json: str | None) -> Where:
    """``--where key=value`` (a list value ``[a,b]`` means any of them), ``key>=v``, ``key~v``
    (contains), and ``--filter '{"key": {"$contains_any": [...]}}'`` merged into one table.
    A malformed one raises ``ValueError`` naming the flag."""
    FilterError = ValueError  # noqa: N806 - no import of geode.recall.filters here: this runs before the fast path

    where: Where = {}
    if filter_json:
        try:
            data = json.loads(filter_json)
        except json.JSONDecodeError as exc:
            raise FilterError(f"--filter is not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise FilterError("--filter must be a JSON object")
        where.update(data)
    for item in items or []:
        for op in _OPS:
            if op in item:
                key, val = item.split(op, 1)
                key = key.strip()
                if not key:
                    raise FilterError(f"--where {item!r}: no key")
                v = _value(val)
                if op == "=":
                    spec = {"$in": v} if isinstance(v, list) else v
                else:
                    spec = {_OPNAME[op]: v}
                prev = where.get(key)
                if isinstance(prev, dict) and isinstance(spec, dict):
                    prev.update(spec)
                else:
                    where[key] = spec
                break
        else:
            raise FilterError(f"--where {item!r}: expected KEY=VALUE, KEY>=VALUE, KEY~VALUE, ...")
    return where
