"""Settings: read once at the entry point, then passed down as one frozen object.

Why a hand-made cache: the hook runs before every tool call and must import only the
standard library, fast. ``tomllib`` pulls in ``typing`` (about 3 ms), so the hook reads a
JSON copy of the parsed settings that is keyed by the identity of ``geode.toml`` (inode,
size, mtime in ns). Any edit to ``geode.toml`` changes that key and the copy is rebuilt.

Resolution order for the store(s):
1. ``--store DIR`` (a one-off store, the only domain for that command),
2. ``GEODE_STORE`` (the same, for a process that cannot take flags: a hook),
3. the ``[domains]`` table of ``GEODE_HOME/geode.toml``,
4. ``GEODE_HOME/store`` when the file names no domain.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

DEFAULT_BUDGET = 4000
DEFAULT_INJECT_BUDGET = 1200
DEFAULT_BOOT_CHARS = 300
DEFAULT_WITHHOLD_RATE = 0.10
DEFAULT_STOP_UNITS = 100
#: Claude Code replaces injected context above this many characters with a file preview.
CLAUDE_CONTEXT_CAP = 10_000
ACT_MODES = ("context", "deny-once")


class ConfigError(Exception):
    """geode.toml cannot be used; the message names the file (and line when known)."""


@dataclass(frozen=True)
class Settings:
    """Everything a command or the hook needs to know, resolved once."""

    home: str
    domains: dict[str, str]
    default_domain: str
    budget: int = DEFAULT_BUDGET
    inject_budget: int = DEFAULT_INJECT_BUDGET
    boot_chars: int = DEFAULT_BOOT_CHARS
    act_mode: str = "context"
    block_lookups: bool = True
    lookup_marker: str = "geode:lookup"
    repeat_backoff_s: int = 0
    withhold_rate: float = DEFAULT_WITHHOLD_RATE
    withhold_rate_source: str = "default"
    stop_units: int = DEFAULT_STOP_UNITS
    stop_date: str | None = None
    control_salt: str = ""
    database_url: str | None = None
    lock_budget_ms: int = 40
    max_file_bytes: int = 1_000_000
    freshness_days: int = 90
    stop_min_actions: int = 5
    one_off_store: bool = False
    warnings: tuple[str, ...] = field(default_factory=tuple)

    # -- derived paths -------------------------------------------------
    @property
    def config_path(self) -> Path:
        return Path(self.home) / "geode.toml"

    @property
    def ledger_path(self) -> Path:
        """SQLite file of the records that cannot be rebuilt (ledger, queue)."""
        return Path(self.home) / "geode.db"

    @property
    def index_dir(self) -> Path:
        return Path(self.home) / "index"

    @property
    def spool_dir(self) -> Path:
        return Path(self.home) / "spool"

    @property
    def db_url(self) -> str:
        return self.database_url or f"sqlite:///{self.ledger_path}"

    @property
    def uses_sqlite_ledger(self) -> bool:
        return self.database_url is None or self.database_url.startswith("sqlite")

    def domain_roots(self) -> list[tuple[str, Path]]:
        return [(name, Path(root)) for name, root in self.domains.items()]


def default_home(env: os._Environ | dict) -> Path:
    home = env.get("GEODE_HOME")
    if home:
        return Path(home).expanduser()
    return Path("~/.geode").expanduser()


def _parse_toml(path: Path) -> dict:
    import tomllib  # only on a cache miss: it costs the hook ~3 ms

    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:  # message carries "(at line N, column M)"
        raise ConfigError(f"{path}: {exc}") from exc
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from exc


def _file_key(path: Path) -> str | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return f"{st.st_ino}:{st.st_size}:{st.st_mtime_ns}"


def read_config_file(home: Path) -> dict:
    """The parsed ``geode.toml`` (empty when absent), through the JSON cache."""
    path = home / "geode.toml"
    key = _file_key(path)
    if key is None:
        return {}
    cache = home / "index" / "settings-cache.json"
    try:
        with open(cache, encoding="utf-8") as fh:
            cached = json.load(fh)
        if cached.get("key") == key:
            return cached["data"]
    except (OSError, ValueError, KeyError):
        pass
    data = _parse_toml(path)
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_name(f".settings-cache.{os.getpid()}.tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump({"key": key, "data": data}, fh, default=str)
        os.replace(tmp, cache)
    except OSError:
        pass  # a cache we cannot write is only slower, never wrong
    return data


def _num(value, kind, name: str, path: Path):
    try:
        return kind(value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{path}: [{name}] must be a {kind.__name__}, got {value!r}") from exc


def load_settings(
    store: str | os.PathLike | None = None,
    home: str | os.PathLike | None = None,
    env: dict | None = None,
) -> Settings:
    """Resolve settings from flags, environment and ``geode.toml``, in that order."""
    env = dict(os.environ) if env is None else env
    home_path = Path(home).expanduser() if home else default_home(env)
    cfg_path = home_path / "geode.toml"
    data = read_config_file(home_path)
    warnings: list[str] = []

    store_arg = store or env.get("GEODE_STORE")
    one_off = bool(store_arg)
    if store_arg:
        root = Path(store_arg).expanduser().resolve()
        domains = {root.name or "store": str(root)}
        default_domain = next(iter(domains))
    else:
        raw = data.get("domains") or {}
        if not isinstance(raw, dict):
            raise ConfigError(f"{cfg_path}: [domains] must be a table of name = \"path\"")
        domains = {}
        for name, root in raw.items():
            p = Path(str(root)).expanduser()
            if not p.is_absolute():
                p = home_path / p
            domains[str(name)] = str(p.resolve())
        if not domains:
            domains = {"main": str((home_path / "store").resolve())}
        default_domain = str(data.get("store", {}).get("default") or next(iter(domains)))
        if default_domain not in domains:
            raise ConfigError(f"{cfg_path}: [store] default = {default_domain!r} names no domain")

    d = data.get("delivery", {}) or {}
    c = data.get("control", {}) or {}
    db = data.get("database", {}) or {}
    budget = _num(d.get("budget", DEFAULT_BUDGET), int, "delivery.budget", cfg_path)
    if budget < 200:
        raise ConfigError(f"{cfg_path}: [delivery] budget = {budget} is too small to carry one note")
    if budget > CLAUDE_CONTEXT_CAP:
        warnings.append(
            f"{cfg_path}: [delivery] budget = {budget} exceeds Claude Code's {CLAUDE_CONTEXT_CAP}-character "
            "context cap; using the cap"
        )
        budget = CLAUDE_CONTEXT_CAP
    act_mode = str(d.get("act_mode", "context"))
    if act_mode not in ACT_MODES:
        raise ConfigError(f"{cfg_path}: [delivery] act_mode = {act_mode!r}; expected one of {ACT_MODES}")

    rate = _num(c.get("withhold_rate", DEFAULT_WITHHOLD_RATE), float, "control.withhold_rate", cfg_path)
    rate_source = "config" if "withhold_rate" in c else "default"
    if env.get("GEODE_WITHHOLD_RATE") not in (None, ""):
        try:
            rate = float(env["GEODE_WITHHOLD_RATE"])
            rate_source = "GEODE_WITHHOLD_RATE"
        except ValueError as exc:
            raise ConfigError(f"GEODE_WITHHOLD_RATE={env['GEODE_WITHHOLD_RATE']!r} is not a number") from exc
    if not 0.0 <= rate <= 1.0:
        raise ConfigError(f"withhold rate {rate} (from {rate_source}) must lie between 0 and 1")

    url = db.get("url") or env.get("GEODE_DATABASE_URL") or None
    return Settings(
        home=str(home_path),
        domains=domains,
        default_domain=default_domain,
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
        one_off_store=one_off,
        warnings=tuple(warnings),
    )


def settings_as_dict(settings: Settings) -> dict:
    return asdict(settings)
