"""Secrets out of observed text before it goes into a draft: detect-secrets, plus assignments.

Why here and not in the hook: detect-secrets (Yelp's maintained detector, its default plugin
set: AWS, GitHub, Slack, JWT, private keys, keyword assignments, high-entropy strings...) is not
standard library, and the hook that records an error runs before the agent's next action. So
the raw lines stay in the local ledger (``geode.delivery.capture``, ``RETENTION_DAYS``) and
are redacted here, when the Gardener builds the draft a person will read and may commit.

What is redacted: each whitespace-separated word holding a value a detector reported (a value
it reports in part, ``ghp`` of a GitHub token, takes the whole word); every line from a
``BEGIN ... PRIVATE KEY`` to its ``END`` line; and the value of a ``password=`` / ``token:``
style assignment or a ``--token VALUE`` option, which detect-secrets reports only in some file
syntaxes (quoted, in code).
"""

from __future__ import annotations

import re

MARK = "[redacted]"

#: ``password=...``, ``PGPASSWORD=...``, ``api_key: ...``, ``--token ...``: the value is redacted
_KEYS = r"(?:pass(?:word|wd)?|pwd|secret|token|api[_-]?key|apikey|auth|credentials?|private[_-]?key)"
_VALUE = r"(\"[^\"]*\"|'[^']*'|[^\s,;&]+)"
_ASSIGN = re.compile(r"(?i)(" + _KEYS + r"[A-Za-z0-9_-]*\s*[=:]\s*)" + _VALUE)
#: ``--token VALUE`` / ``-p VALUE`` style options: the next word is the value
_OPTION = re.compile(r"(?i)((?:^|\s)--?[A-Za-z0-9_-]*" + _KEYS + r"[A-Za-z0-9_-]*\s+)(?!-)" + _VALUE)
_KEY_BEGIN = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----")
_KEY_END = re.compile(r"-----END [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----")


def _found(line: str) -> list[str]:
    """The secret values detect-secrets' default plugins report on one line."""
    from detect_secrets.core.scan import get_plugins
    from detect_secrets.settings import default_settings

    out: list[str] = []
    with default_settings():
        for plugin in get_plugins():
            for secret in plugin.analyze_line(filename="observed-error.log", line=line, line_number=1):
                if secret.secret_value:
                    out.append(str(secret.secret_value))
    return out


def redact_line(line: str) -> str:
    """One line with every secret a detector or an assignment names replaced by ``[redacted]``."""
    if _KEY_BEGIN.search(line):
        return MARK + " (private key)"
    values = _found(line)
    if values:
        words = line.split(" ")
        line = " ".join(MARK if any(v in w or w in v and len(w) > 3 for v in values) else w for w in words)
    line = _ASSIGN.sub(lambda m: m.group(1) + MARK, line)
    return _OPTION.sub(lambda m: m.group(1) + MARK, line)


def redact_lines(lines: list[str]) -> list[str]:
    """Each line redacted; the lines inside a private key block are dropped for one marker."""
    out: list[str] = []
    in_key = False
    for line in lines:
        if in_key:
            if _KEY_END.search(line):
                in_key = False
            continue
        if _KEY_BEGIN.search(line):
            out.append(MARK + " (private key)")
            in_key = not _KEY_END.search(line)
            continue
        out.append(redact_line(line))
    return out
