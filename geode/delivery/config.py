"""Settings: read once at the entry point, then passed down as one object.

Why no dataclasses, pathlib or json here: this module is on the hook's path, and those
imports cost 2 to 10 ms each at start-up (``dataclasses`` pulls in ``inspect``, ``pathlib``
pulls in ``re`` and ``urllib``, ``json`` pulls in ``re`` and ``enum``). Paths are strings.

Why a hand-made cache: ``tomllib`` pulls in ``typing`` (about 3 ms), so the hook reads a
JSON copy of the parsed settings keyed by the identity of ``geode.toml`` (inode, size,
mtime in ns). Any edit to ``geode.toml`` changes that key and the copy is rebuilt.

Resolution order for the store(s):
1. ``--store DIR`` (a one-off store, the only domain for that command),
2. ``GEODE_STORE`` (the same, for a process that cannot take flags: a hook),
3. the ``[domains]`` table of ``GEODE_HOME/geode.toml``,
4. ``GEODE_HOME/store`` when the file names no domain.
"""

from __future__ import annotations

import os

from geode.delivery import fastjson
from geode.delivery.errors import GeodeError

DEFAULT_BUDGET = 4000
DEFAULT_INJECT_BUDGET = 1200
DEFAULT_BOOT_CHARS = 300
DEFAULT_WITHHOLD_RATE = 0.10
DEFAULT_STOP_UNITS = 100
#: Claude Code replaces injected context above this many characters with a file preview.
CLAUDE_CONTEXT_CAP = 10_000
ACT_MODES = ("context", "deny-once")

_DEFAULTS = {
    "budget": DEFAULT_BUDGET,
    "inject_budget": DEFAULT_INJECT_BUDGET,
    "boot_chars": DEFAULT_BOOT_CHARS,
    "act_mode": "context",
    "block_lookups": True,
    "lookup_marker": "geode:lookup",
    "repeat_backoff_s": 0,
    "withhold_rate": DEFAULT_WITHHOLD_RATE,
    "withhold_rate_source": "default",
    "stop_units": DEFAULT_STOP_UNITS,
    "stop_date": None,
    "control_salt": "",
    "database_url": None,
    "lock_budget_ms": 40,
    "max_file_bytes": 1_000_000,
    "freshness_days": 90,
    "stop_min_actions": 5,
    "sweep_files": 400,
    "sweep_folders": 300,
    "known_agents": (),
    "one_off_store": False,
    "warnings": (),
}


class ConfigError(GeodeError):
    """geode.toml cannot be used; the message names the file (and line when known)."""


class Settings:
    """Everything a command or the hook needs to know, resolved once. Treat as read-only."""

    __slots__ = ("home", "domains", "default_domain") + tuple(_DEFAULTS)

    def __init__(self, home: str, domains: dict[str, str], default_domain: str, **kw):
        self.home = home
        self.domains = domains
        self.default_domain = default_domain
        for key, value in _DEFAULTS.items():
            setattr(self, key, kw.pop(key, value))
        if kw:
            raise TypeError(f"unknown settings: {sorted(kw)}")

    def replace(self, **kw) -> "Settings":
        values = {k: getattr(self, k) for k in _DEFAULTS}
        values.update({k: v for k, v in kw.items() if k in _DEFAULTS})
        base = {k: kw.get(k, getattr(self, k)) for k in ("home", "domains", "default_domain")}
        return Settings(base["home"], base["domains"], base["default_domain"], **values)

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__slots__}

    def __repr__(self) -> str:
        return f"Settings(home={self.home!r}, domains={self.domains!r})"

    # -- derived paths (strings) -------------------------------------------
    @property
    def config_path(self) -> str:
        return os.path.join(self.home, "geode.toml")

    @property
    def ledger_path(self) -> str:
        """SQLite file of the records that cannot be rebuilt (ledger, queue)."""
        return os.path.join(self.home, "geode.db")

    @property
    def index_dir(self) -> str:
        return os.path.join(self.home, "index")

    @property
    def spool_dir(self) -> str:
        return os.path.join(self.home, "spool")

    @property
    def db_url(self) -> str:
        return self.database_url or f"sqlite:///{self.ledger_path}"

    @property
    def uses_sqlite_ledger(self) -> bool:
        return self.database_url is None or self.database_url.startswith("sqlite")

    def domain_roots(self) -> list[tuple[str, str]]:
        return list(self.domains.items())


def default_home(env: dict) -> str:
    home = env.get("GEODE_HOME")
    return os.path.abspath(os.path.expanduser(home or "~/.geode"))


def _parse_toml(path: str) -> dict:
    import tomllib  # only on a cache miss: it costs the hook ~3 ms

    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:  # its message carries "(at line N, column M)"
        raise ConfigError(f"{path}: {exc}") from exc
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from exc


def _file_key(path: str) -> str | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return f"{st.st_ino}:{st.st_size}:{st.st_mtime_ns}"


def read_config_file(home: str) -> dict:
    """The parsed ``geode.toml`` (empty when absent), through the JSON cache."""
    path = os.path.join(home, "geode.toml")
    key = _file_key(path)
    if key is None:
        return {}
    cache = os.path.join(home, "index", "settings-cache.json")
    try:
        with open(cache, encoding="utf-8") as fh:
            cached = fastjson.loads(fh.read())
        if cached.get("key") == key:
            return cached["data"]
    except (OSError, ValueError, KeyError, AttributeError):
        pass
    data = _parse_toml(path)
    try:
        os.makedirs(os.path.dirname(cache), exist_ok=True)
        tmp = f"{cache}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(fastjson.dumps({"key": key, "data": _jsonable(data)}))
        os.replace(tmp, cache)
    except (OSError, TypeError):
        pass  # a cache we cannot write is only slower, never wrong
    return data


def _jsonable(value):
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)  # dates and times from TOML


def _num(value, kind, name: str, path: str):
    try:
        return kind(value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{path}: [{name}] must be a {kind.__name__}, got {value!r}") from exc


def load_settings(store: str | os.PathLike | None = None, home: str | os.PathLike | None = None,
                  env: dict | None = None) -> Settings:
    """Resolve settings from flags, environment and ``geode.toml``, in that order."""
    env = dict(os.environ) if env is None else env
    home_path = os.path.abspath(os.path.expanduser(os.fspath(home))) if home else default_home(env)
    cfg_path = os.path.join(home_path, "geode.toml")
    data = read_config_file(home_path)
    warnings: list[str] = []

    store_arg = os.fspath(store) if store else env.get("GEODE_STORE")
    one_off = bool(store_arg)
    if store_arg:
        root = os.path.realpath(os.path.expanduser(store_arg))
        domains = {os.path.basename(root) or "store": root}
        default_domain = next(iter(domains))
    else:
        raw = data.get("domains") or {}
        if not isinstance(raw, dict):
            raise ConfigError(f'{cfg_path}: [domains] must be a table of name = "path"')
        domains = {}
        for name, root in raw.items():
            p = os.path.expanduser(str(root))
            if not os.path.isabs(p):
                p = os.path.join(home_path, p)
            domains[str(name)] = os.path.realpath(p)
        if not domains:
            domains = {"main": os.path.realpath(os.path.join(home_path, "store"))}
        default_domain = str((data.get("store") or {}).get("default") or next(iter(domains)))
        if default_domain not in domains:
            raise ConfigError(f"{cfg_path}: [store] default = {default_domain!r} names no domain")

    d = data.get("delivery") or {}
    c = data.get("control") or {}
    db = data.get("database") or {}
    budget = _num(d.get("budget", DEFAULT_BUDGET), int, "delivery.budget", cfg_path)
    if budget < 200:
        raise ConfigError(f"{cfg_path}: [delivery] budget = {budget} is too small to carry one note")
    if budget > CLAUDE_CONTEXT_CAP:
        warnings.append(f"{cfg_path}: [delivery] budget = {budget} exceeds Claude Code's "
                        f"{CLAUDE_CONTEXT_CAP}-character context cap; using the cap")
        budget = CLAUDE_CONTEXT_CAP
    act_mode = str(d.get("act_mode", "context"))
    if act_mode not in ACT_MODES:
        raise ConfigError(f"{cfg_path}: [delivery] act_mode = {act_mode!r}; expected one of {ACT_MODES}")

    rate = _num(c.get("withhold_rate", DEFAULT_WITHHOLD_RATE), float, "control.withhold_rate", cfg_path)
    rate_source = "config" if "withhold_rate" in c else "default"
    if env.get("GEODE_WITHHOLD_RATE") not in (None, ""):
        try:
            rate = float(env["GEODE_WITHHOLD_RATE"])
        except ValueError as exc:
            raise ConfigError(f"GEODE_WITHHOLD_RATE={env['GEODE_WITHHOLD_RATE']!r} is not a number") from exc
        rate_source = "GEODE_WITHHOLD_RATE"
    if not 0.0 <= rate <= 1.0:
        raise ConfigError(f"withhold rate {rate} (from {rate_source}) must lie between 0 and 1")

    url = db.get("url") or env.get("GEODE_DATABASE_URL") or None
    agents = d.get("agents") or ()
    return Settings(
        home_path, domains, default_domain,
        budget=budget,
        inject_budget=_num(d.get("inject_budget", DEFAULT_INJECT_BUDGET), int, "delivery.inject_budget", cfg_path),
        boot_chars=_num(d.get("boot_chars", DEFAULT_BOOT_CHARS), int, "delivery.boot_chars", cfg_path),
        act_mode=act_mode,
        block_lookups=bool(d.get("block_lookups", True)),
        lookup_marker=str(d.get("lookup_marker", "geode:lookup")),
        repeat_backoff_s=_num(d.get("repeat_backoff_s", 0), int, "delivery.repeat_backoff_s", cfg_path),
        withhold_rate=rate,
        withhold_rate_source=rate_source,
        stop_units=_num(c.get("stop_units", DEFAULT_STOP_UNITS), int, "control.stop_units", cfg_path),
        stop_date=str(c["stop_date"]) if c.get("stop_date") else None,
        control_salt=str(c.get("salt", "")),
        database_url=str(url) if url else None,
        lock_budget_ms=_num(d.get("lock_budget_ms", 40), int, "delivery.lock_budget_ms", cfg_path),
        max_file_bytes=_num(d.get("max_file_bytes", 1_000_000), int, "delivery.max_file_bytes", cfg_path),
        freshness_days=_num(d.get("freshness_days", 90), int, "delivery.freshness_days", cfg_path),
        stop_min_actions=_num(d.get("stop_min_actions", 5), int, "delivery.stop_min_actions", cfg_path),
        sweep_files=_num(d.get("sweep_files", 400), int, "delivery.sweep_files", cfg_path),
        sweep_folders=_num(d.get("sweep_folders", 300), int, "delivery.sweep_folders", cfg_path),
        known_agents=tuple(str(a) for a in (agents if isinstance(agents, list) else [agents])),
        one_off_store=one_off,
        warnings=tuple(warnings),
    )
