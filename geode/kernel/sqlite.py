"""``sqlite3`` for the hook, without the import cost of its Python wrapper.

``import sqlite3`` also imports ``datetime`` and ``collections.abc`` to register date
adapters that geode never uses (about 2 ms of a 25 ms hook budget). The C module
``_sqlite3`` carries ``connect``, the connection and cursor types and every exception class,
which is all the hook needs. Elsewhere, import ``sqlite3`` as usual.
"""

try:
    import _sqlite3 as sqlite3
except ImportError:  # pragma: no cover - an interpreter without the split module
    import sqlite3  # type: ignore[no-redef]

__all__ = ["sqlite3"]
