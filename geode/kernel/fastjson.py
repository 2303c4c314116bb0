"""JSON through the C accelerator alone, for the hook's start-up budget.

``import json`` costs the hook about 9 ms because ``json.decoder`` imports ``re`` and
``enum``: a third of a 25 ms budget, spent before any work. The C scanner and encoder in
``_json`` do the whole job without them. Falls back to ``json`` where ``_json`` is missing
(other interpreters). ``tests/test_fastjson.py`` checks equivalence with ``json``.
"""

from __future__ import annotations

from geode.kernel.errors import GeodeError

try:
    import _json as _c
except ImportError:  # pragma: no cover - CPython always has it
    _C_JSON = False
else:
    _C_JSON = True


class JSONDecodeError(GeodeError, ValueError):
    """Malformed JSON; message carries the position."""


def _constant(name: str) -> float:
    return {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}[name]


class _Context:
    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = staticmethod(_constant)
    memo: dict = {}


def _unsupported(obj):
    raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")


if _C_JSON:
    # typeshed types make_scanner's context as make_scanner itself (its own TODO: any object with
    # the decoder's attributes, which _Context is)
    _scanner = _c.make_scanner(_Context())  # type: ignore[arg-type]
    _encoder = _c.make_encoder(None, _unsupported, _c.encode_basestring_ascii, None, ":", ",", False, False, True)
    _encoder_spaced = _c.make_encoder(
        None, _unsupported, _c.encode_basestring_ascii, None, ": ", ", ", False, False, True
    )

    def loads(text: str | bytes):
        """Parse one JSON document (whitespace around it allowed)."""
        if isinstance(text, (bytes, bytearray)):
            text = text.decode("utf-8-sig")
        start = 0
        n = len(text)
        while start < n and text[start] in " \t\r\n":
            start += 1
        try:
            obj, end = _scanner(text, start)
        except StopIteration as exc:
            raise JSONDecodeError(f"expecting a value at char {exc.value}") from None
        except ValueError as exc:
            raise JSONDecodeError(str(exc)) from None
        while end < n and text[end] in " \t\r\n":
            end += 1
        if end != n:
            raise JSONDecodeError(f"extra data at char {end}")
        return obj

    def dumps(obj, spaced: bool = False) -> str:
        """Compact ASCII JSON (``spaced`` adds a space after ``:`` and ``,``)."""
        if isinstance(obj, str):
            return _c.encode_basestring_ascii(obj)
        return "".join((_encoder_spaced if spaced else _encoder)(obj, 0))

else:  # pragma: no cover
    import json as _json

    def loads(text: str | bytes):
        try:
            return _json.loads(text)
        except _json.JSONDecodeError as exc:
            raise JSONDecodeError(str(exc)) from None

    def dumps(obj, spaced: bool = False) -> str:
        return _json.dumps(obj, separators=(", ", ": ") if spaced else (",", ":"))
