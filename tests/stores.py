"""The one way the tests build a temporary store: files written under a folder, a GEODE_HOME
beside it, settings and the records database.

``tests/conftest.py`` hands a ``GeodeEnv`` to a test as the ``geode_env`` fixture; the plain
functions here are for the places a function-scoped fixture cannot reach (Hypothesis tests, a
module-scoped fixture, a second store in one test, a script run in a subprocess).

Two kinds of settings, on purpose:

- ``GeodeEnv.settings`` is what a person's ``geode --store ROOT`` resolves: ``load_settings``
  with the store folder and the home's ``geode.toml``, and never the process environment
  (``env={}`` unless a test passes its own), so a developer's ``GEODE_*`` variables cannot leak
  into a test. The domain is named after the store folder, as it is for a person.
- ``plain_settings`` builds ``Settings`` directly, reading no file and no environment, for the
  tests of the ledger, the control arm and the queue that pin every value themselves.

Everything lives under the folder a test gives (its ``tmp_path``); ``~/.geode`` is never touched.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import MappingProxyType

#: the environment ``GeodeEnv`` settings see unless a test passes one: none at all
NO_ENV: Mapping[str, str] = MappingProxyType({})

#: the file mode ``write`` gives a file unless told otherwise: fixed, so no result depends on the umask
FILE_MODE = 0o644


def write(root: str | os.PathLike, rel: str, data: str | bytes, mode: int | None = FILE_MODE) -> Path:
    """Write ``data`` (text as UTF-8, bytes as they are) to ``root/rel``, creating its folders.

    Text is written without newline translation, so ``"\\r\\n"`` in a test stays ``"\\r\\n"`` on
    disk. ``mode=None`` leaves the mode to the umask. Returns the file's path.
    """
    p = Path(root) / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    if mode is not None:
        os.chmod(p, mode)
    return p


def note(body: str, **fm) -> str:
    """A note with flow-style frontmatter (``key: value``, lists as ``[a, b]``) and ``body``."""
    lines = []
    for k, v in fm.items():
        if isinstance(v, list):
            v = "[" + ", ".join(str(x) for x in v) + "]"
        lines.append(f"{k}: {v}")
    return "---\n" + "\n".join(lines) + "\n---\n" + body + "\n"


def snapshot(root: str | os.PathLike) -> dict[str, tuple[str, int]]:
    """Every regular file under ``root``: relative path -> (sha256, mode), to prove an undo
    restored the store byte for byte (symlinks and folders are not files)."""
    out = {}
    for dirpath, _dirnames, filenames in os.walk(root):
        for name in filenames:
            p = Path(dirpath) / name
            st = p.lstat()
            if stat.S_ISREG(st.st_mode):
                out[str(p.relative_to(root))] = (hashlib.sha256(p.read_bytes()).hexdigest(), stat.S_IMODE(st.st_mode))
    return out


def plain_settings(home: str | os.PathLike, root: str | os.PathLike | None = None, **kw):
    """``Settings`` made directly: the domain ``main`` at ``root`` (the folder is created), or no
    domain when no root is given; ``kw`` are the settings a test pins (``database_url``,
    ``withhold_rate``, ...). No ``geode.toml`` and no environment variable is read."""
    from geode.kernel.config import Settings

    domains = {}
    if root is not None:
        Path(root).mkdir(parents=True, exist_ok=True)
        domains["main"] = str(root)
    return Settings(home=str(home), domains=domains, default_domain="main", **kw)


def fresh_settings(root: str | os.PathLike, home: str | os.PathLike):
    """``load_settings`` for the store ``root`` and home ``home`` as a fresh user's first command
    sees them: this process's environment without any GEODE_ variable."""
    from geode.kernel.config import load_settings

    env = {k: v for k, v in os.environ.items() if not k.startswith("GEODE_")}
    return load_settings(store=str(root), home=str(home), env=env)


class GeodeEnv:
    """A store folder and a GEODE_HOME under ``base``: ``base/<root>`` and ``base/<home>``.

    ``settings`` and ``engine`` are made on first use, after the files and ``geode.toml`` a
    test wrote, the order a person's first command sees them in; ``toml`` forgets the settings
    read before it. Unpacks as ``settings, engine, root``, the triple the agent tests work with.
    """

    def __init__(
        self,
        base: str | os.PathLike,
        root: str | os.PathLike = "store",
        home: str = "home",
        env: Mapping[str, str] | None = NO_ENV,
    ):
        self.base = Path(base)
        self.root = self.base / root  # an absolute ``root`` stays itself
        self.home = self.base / home
        self.root.mkdir(parents=True, exist_ok=True)
        self.home.mkdir(parents=True, exist_ok=True)
        #: the environment ``load_settings`` sees; ``None``: the process's own, as a shell's
        #: command reads it (for a test that sets ``GEODE_*`` through monkeypatch)
        self.env = env
        self._settings = None
        self._engine = None

    # -- files ----------------------------------------------------------------------------------
    def write(self, rel: str, data: str | bytes, mode: int | None = FILE_MODE) -> Path:
        """Write one file of the store (see ``write``)."""
        return write(self.root, rel, data, mode)

    def files(self, files: Mapping[str, str | bytes], toml: str = "") -> GeodeEnv:
        """Write every ``rel: data`` of ``files`` (and ``geode.toml`` when given); returns self."""
        for rel, data in files.items():
            self.write(rel, data)
        if toml:
            self.toml(toml)
        return self

    def toml(self, text: str) -> Path:
        """Write ``GEODE_HOME/geode.toml``; settings read before it are read again (an engine
        made before stays: it depends only on where the records are)."""
        path = self.home / "geode.toml"
        path.write_text(text, encoding="utf-8")
        self._settings = None
        return path

    # -- settings and records ---------------------------------------------------------------------
    def load_settings(self):
        """Settings resolved now, from the store folder, the home and its ``geode.toml``."""
        from geode.kernel.config import load_settings

        return load_settings(store=self.root, home=self.home, env=None if self.env is None else dict(self.env))

    @property
    def settings(self):
        if self._settings is None:
            self._settings = self.load_settings()
        return self._settings

    @property
    def engine(self):
        """The records database (GEODE_HOME/geode.db unless the settings name another), with the
        ledger and the upkeep tables created, as ``geode upkeep`` leaves it."""
        if self._engine is None:
            from geode.agents.contract import ensure_tables
            from geode.records.models import init_db

            self._engine = init_db(self.settings)
            ensure_tables(self._engine)
        return self._engine

    def __iter__(self) -> Iterator:
        yield self.settings
        yield self.engine
        yield self.root

    def close(self) -> None:
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None


#: The environment a test's own `geode` process gets back after the GEODE_ variables were
#: stripped (a fresh user): no detached vector build outlives the test (tests/conftest.py says why;
#: the tests of the background build itself leave it on).
NO_BACKGROUND_BUILD = {"GEODE_BACKGROUND_BUILD": "0"}
