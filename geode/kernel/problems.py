"""One shape for everything that is wrong with a file, from a load error to a lint finding."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Problem:
    """``path`` is relative to its store (or absolute when outside any); ``line`` is 1-based, 0 = whole file."""

    path: str
    line: int
    code: str
    severity: str  # "error" | "warning" | "info"
    message: str
    domain: str = ""

    def as_dict(self) -> dict:
        d = asdict(self)
        if not d["domain"]:
            d.pop("domain")
        return d

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.severity}: {self.message} [{self.code}]"
