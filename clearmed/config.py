"""The project configuration: one TOML file -> validated, typed settings for every part of the program.

Tables: `[backbones.<role>]` (main required; assessor, teacher, prompt_model, judge optional), `[corpus]`,
`[search]`, `[quality_priors]`, `[thresholds]`, `[program]` and `[run]`. Unknown keys, missing
environment variables and bad values are reported in one line naming the file and the field; types are strict
everywhere (a number written as a string is refused, not coerced), paths being the one conversion.
Relative paths are resolved against the config file's folder, so a config travels with its data.

`extends = "o3-mini"` (a packaged config, or a path relative to the file) inherits another config: its tables are
merged key by key under this file's, each file's relative paths resolved against its own folder. `--set
section.key=value` overrides (`load_config(..., overrides=[...])`) are merged last, their values read as TOML
(`--set program.local_k=32`, `--set backbones.main.model=gpt-4o`: a value that is not TOML is a string), relative
paths against the working directory. The merged tables are validated like one file. A layer that changes a
backbone's `kind` keeps of the layers under it only the fields of the new kind (`backbones.config.kind_fields`), so
an embedded config is pointed at a server with `kind` and `api_base` alone.

A run folder (or its config.json, `SNAPSHOT`) is a config too: the one that run was made with, so `-c RUN_DIR` reruns
it (`--set` over it). `overrides_label` names a run's overrides in its default folder, so a sweep never collides.
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from clearmed.backbones.config import PATH_FIELDS as BACKBONE_PATH_FIELDS
from clearmed.backbones.config import (
    AnyBackbone,
    ConfigError,
    RemoteBackbone,
    flat_defaults_dropped,
    format_validation_error,
    kind_fields,
    parse_backbones,
)
from clearmed.core.sanitize import REDACTED, redact_secrets, register_secret_env, register_url_credentials
from clearmed.retrieval.config import CorpusConfig, SearchConfig
from clearmed.retrieval.priors import QualityPriors
from clearmed.signatures.records import Thresholds
from clearmed.signatures.records.settings import ProgramSettings

DEFAULT_CONFIG = "embedded"


class RunSettings(BaseModel):
    """How scripts run the program: threads for evaluation, the seed, where results go, and the budget."""

    model_config = ConfigDict(extra="forbid")

    num_threads: int = Field(default=1, ge=1, description="questions evaluated concurrently")
    seed: int = 0
    runs_dir: Path = Path("runs")
    lm_cache_dir: Path | None = Field(default=None, description="DSPy's LM cache folder ($DSPY_CACHEDIR)")
    max_cost: float | None = Field(
        default=None,
        gt=0,
        description="US dollars a run may spend (LM calls, Tavily credits, grading); no question starts past it",
    )
    # Tavily's pay-as-you-go price (tavily.com/pricing); a plan's is lower.
    tavily_usd_per_credit: float = Field(default=0.008, ge=0, description="US dollars per Tavily credit")
    # OpenAI's and Anthropic's batches take minutes to hours: asking every 30 s costs nothing and wastes little.
    batch_poll_s: float = Field(
        default=30.0, gt=0, description="seconds between status checks of a batch run's provider batches (eval --batch)"
    )


# Settings that change how a run goes, never what it answers: where the config was read from, the [run] table, time
# limits, retries, caches, keys' variable names, prices and budgets, and where a service is reached (a backbone's
# api_base, Tavily's api_base_url: the same server as localhost or 127.0.0.1, or a vLLM server restarted on another
# node, serves the same model). Left out of the config digest, so a run resumes after a timeout is raised, the thread
# count changed or its server moved (`answer_settings`); everything else (the model among it) is a different run.
# The removed settings (`_REMOVED`) are left out too: a snapshot an older clearmed wrote holds them.
_OPERATIONAL: Final[dict[str, Any]] = {
    "source": True,
    "run": True,
    "backbones": {
        "__all__": {
            "timeout",
            "num_retries",
            "cache",
            "price",
            "prompt_cache_mb",
            "model_cache_dir",
            "api_key_env",
            "api_base",
        }
    },
    "search": {
        "timeout": True,
        "cache_path": True,
        "cache_mode": True,
        "tavily": {"api_key_env", "api_base_url"},
        "max_results": True,
    },
    "corpus": {"threads", "hit_cache", "hit_cache_mode", "k"},
}

# Settings removed because they decided nothing, and the one that decides: a config that sets one is refused like any
# unknown key, naming it.
_REMOVED: Final[dict[tuple[str, str], str]] = {
    ("corpus", "k"): "[program] local_k",
    ("search", "max_results"): "[program] dynamic_k",
}


class ClearmedConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source: str = ""
    backbones: dict[str, AnyBackbone]
    corpus: CorpusConfig | None = None
    search: SearchConfig | None = None
    quality_priors: QualityPriors | None = Field(default_factory=QualityPriors)
    thresholds: Thresholds = Field(default_factory=Thresholds)
    program: ProgramSettings = Field(default_factory=ProgramSettings)
    run: RunSettings = Field(default_factory=RunSettings)


def answer_settings(config: ClearmedConfig, *, exclude_defaults: bool = False) -> dict[str, Any]:
    """The config as JSON data minus its operational settings: what the config digest fingerprints."""
    return json.loads(
        config.model_dump_json(exclude=_OPERATIONAL, exclude_none=True, exclude_defaults=exclude_defaults)
    )


def without_operational(data: Mapping[str, Any]) -> dict[str, Any]:
    """A config as JSON data (a run folder's config.json, say) minus its operational settings, and minus the other
    kinds' fields a snapshot written before backbones were split by kind holds for each backbone."""
    out = _without(data, _OPERATIONAL)
    backbones = out.get("backbones")
    if isinstance(backbones, Mapping):
        out["backbones"] = {
            role: flat_defaults_dropped(table) if isinstance(table, Mapping) else table
            for role, table in backbones.items()
        }
    return out


def _without(data: Mapping[str, Any], spec: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        rule = spec.get(key, spec.get("__all__"))  # True: drop it; a set: drop those keys of it; a mapping: recurse
        if rule is True:
            continue
        if isinstance(rule, set | frozenset) and isinstance(value, Mapping):
            out[key] = {name: item for name, item in value.items() if name not in rule}
        elif isinstance(rule, Mapping) and isinstance(value, Mapping):
            out[key] = _without(value, rule)
        else:
            out[key] = value
    return out


def packaged_configs() -> dict[str, Path]:
    """The configs shipped with clearmed, by name (file stem)."""
    folder = resources.files("clearmed.configs")
    return {Path(entry.name).stem: Path(str(entry)) for entry in folder.iterdir() if entry.name.endswith(".toml")}


# The config a run folder keeps (`clearmed.evaluation.folder.config_snapshot`): `-c RUN_DIR` reruns it.
SNAPSHOT = "config.json"


def resolve_config_path(name_or_path: str | None) -> Path:
    """A packaged config name (`embedded`, `o3-mini`, ...), a path to a TOML file, or a run folder (or its
    config.json): the config that run was made with."""
    name = name_or_path or DEFAULT_CONFIG
    candidate = Path(name)
    if candidate.is_dir():
        if not (candidate / SNAPSHOT).is_file():
            raise ConfigError(f"{name}: a folder with no {SNAPSHOT}: give a config name, a TOML file or a run folder")
        return candidate / SNAPSHOT
    if candidate.suffix in (".toml", ".json") or candidate.exists():
        if not candidate.is_file():
            raise ConfigError(f"{name}: config file not found")
        return candidate
    shipped = packaged_configs()
    if name in shipped:
        return shipped[name]
    raise ConfigError(f"{name}: no such config file, and not a packaged config ({', '.join(sorted(shipped))})")


_PATH_FIELDS = {
    "corpus": ("path", "index_dir", "data_root", "db_dir", "hit_cache"),
    "search": ("pages", "index_dir", "cache_path", "data_root"),
    "run": ("runs_dir", "lm_cache_dir"),
}


def _resolve_paths(
    tables: dict[str, Any], base: Path | None, fields: Mapping[str, Sequence[str]] = _PATH_FIELDS
) -> dict[str, Any]:
    """Path fields given as strings become paths (relative ones against `base`): the only conversion a config gets,
    as every other field is validated strictly."""
    resolved = dict(tables)
    for section, names in fields.items():
        table = resolved.get(section)
        if not isinstance(table, Mapping):
            continue
        table = dict(table)
        for name in names:
            value = table.get(name)
            if isinstance(value, str) and value and base is not None and not Path(value).expanduser().is_absolute():
                table[name] = (base / value).resolve()
            elif isinstance(value, str) and value:
                table[name] = Path(value).expanduser()
        resolved[section] = table
    return resolved


def parse_config(tables: Mapping[str, Any], *, source: str = "", base: Path | None = None) -> ClearmedConfig:
    """Validate parsed TOML tables; raise a one-line ConfigError naming the source and field."""
    data = dict(tables)
    backbones_table = data.pop("backbones", None)
    if not isinstance(backbones_table, Mapping):
        where = f"{source}: " if source else ""
        raise ConfigError(f"{where}backbones: a [backbones.main] table is required")
    backbones = parse_backbones(backbones_table, source=source, base=base)
    data = _resolve_paths(data, base)
    _refuse_removed(data, source)
    try:
        # Strict, as [backbones] is: TOML has real types, so num_threads = "2" or local_k = "4" is a mistake to
        # report, not a string to coerce.
        config = ClearmedConfig.model_validate({**data, "backbones": backbones, "source": source}, strict=True)
    except ValidationError as err:
        raise ConfigError(format_validation_error(err, source, "")) from None
    register_config_secrets(config)
    return config


def _refuse_removed(tables: Mapping[str, Any], source: str) -> None:
    for (section, key), replacement in _REMOVED.items():
        table = tables.get(section)
        if isinstance(table, Mapping) and key in table:
            where = f"{source}: " if source else ""
            raise ConfigError(f"{where}{section}.{key}: unknown key ([{section}] {key} was removed: set {replacement})")


def register_config_secrets(config: ClearmedConfig) -> None:
    """Every credential the config resolves is masked wherever text is written (records, logs, the report), whatever
    its shape: each backbone's `api_key_env` value, the Tavily key, and the user and password in an `api_base`."""
    for backbone in config.backbones.values():
        if isinstance(backbone, RemoteBackbone):
            register_secret_env(backbone.api_key_env)
            register_url_credentials(backbone.api_base)
    if config.search is not None:
        register_secret_env(config.search.tavily.api_key_env)
        register_url_credentials(config.search.tavily.api_base_url)


def load_config(name_or_path: str | None = None, overrides: Sequence[str] = ()) -> ClearmedConfig:
    """A packaged config or TOML file, with what it `extends` under it and the `--set` overrides over it; or the
    config a run folder was made with (the folder, or its config.json), with the overrides over it."""
    path = resolve_config_path(name_or_path)
    tables = with_overrides(_read_extended(path, chain=()), overrides)
    base: Path | None = path.parent
    if path.suffix == ".json":  # its paths are absolute, or relative to the working folder as the run read them
        _refuse_masked(tables, path)
        base = None
    try:
        return parse_config(tables, source=str(path), base=base)
    except ConfigError as err:
        if not overrides:
            raise
        raise ConfigError(f"{err} (with --set {' --set '.join(overrides)})") from None


def with_overrides(tables: Mapping[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """`tables` with the `--set` overrides merged over them (`parse_overrides`; relative paths against the working
    folder): the one place overrides are applied, to a whole config (`load_config`) or to the one table a command
    reads (`config_tables`)."""
    if not overrides:
        return dict(tables)
    return _layered(tables, _absolute_paths(parse_overrides(overrides), Path.cwd()))


def config_tables(name_or_path: str | None, overrides: Sequence[str] = ()) -> dict[str, Any]:
    """A config's tables merged as `load_config` merges them (what it extends under it, the overrides over it), every
    path absolute, but not validated: for a command that reads one table alone (`clearmed index build`'s [corpus],
    which needs no [backbones]). None names no file (not the default config): the overrides alone."""
    tables: dict[str, Any] = {}
    if name_or_path is not None:
        path = resolve_config_path(name_or_path)
        # A run's config.json holds paths as the run read them: absolute, or relative to the working folder.
        base = Path.cwd() if path.suffix == ".json" else path.parent
        tables = _absolute_paths(_read_extended(path, chain=()), base)
    return with_overrides(tables, overrides)


def config_name(source: str) -> str:
    """What a config is called in run folder names and tables: its file's stem (`o3-mini`), or, for the config a run
    folder keeps, that folder's name."""
    path = Path(source)
    if path.is_dir():
        return path.name
    return path.parent.name if path.name == SNAPSHOT else path.stem


def read_snapshot(path: Path) -> dict[str, Any]:
    """A run folder's config.json (`path` is the folder or the file) as config tables: every setting the run was made
    with, its paths absolute. The one reader of the file: `-c RUN_DIR` and the run folder's own
    (`clearmed.evaluation.folder`)."""
    path = path / SNAPSHOT if path.is_dir() else path
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as err:
        raise ConfigError(f"{path}: not valid JSON: {err}") from None
    except OSError as err:
        raise ConfigError(f"{path}: cannot read: {err}") from None
    if not isinstance(data, dict) or not isinstance(data.get("backbones"), dict):
        raise ConfigError(f"{path}: not a run's config snapshot (it has no backbones table)")
    return data


def _refuse_masked(tables: Mapping[str, Any], path: Path, where: str = "") -> None:
    """A run folder's config has its credentials masked (a password in an `api_base`): rerun with it given again."""
    for key, value in tables.items():
        dotted = f"{where}.{key}" if where else key
        if isinstance(value, Mapping):
            _refuse_masked(value, path, dotted)
        elif isinstance(value, str) and REDACTED in value:
            raise ConfigError(
                f"{path}: {dotted}: a credential in it was masked when the run was saved; give it again with "
                f"--set {dotted}=..."
            )


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path}: not valid TOML: {err}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"{path}: cannot read: {err}") from None


def _read_extended(path: Path, chain: tuple[Path, ...]) -> dict[str, Any]:
    """The file's tables merged over those of the config it extends (recursively); paths of an extended file are
    made absolute against its own folder, as they would be read alone."""
    if path.resolve() in chain:
        raise ConfigError(f"{chain[0]}: extends {path}, which extends it again")
    if path.suffix == ".json":  # where the config it was read from once lived is left out: this file is its source
        return {key: value for key, value in read_snapshot(path).items() if key != "source"}
    tables = _read_toml(path)
    parent = tables.pop("extends", None)
    if parent is None:
        return tables
    if not isinstance(parent, str) or not parent:
        raise ConfigError(f"{path}: extends must be a packaged config name or a TOML path, not {parent!r}")
    relative = path.parent / parent
    parent_path = resolve_config_path(str(relative) if relative.suffix == ".toml" else parent)
    inherited = _absolute_paths(_read_extended(parent_path, (*chain, path.resolve())), parent_path.parent)
    return _layered(inherited, tables)


def _layered(under: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """One config's tables over another's (a file over what it extends, `--set` over the file): merged key by key,
    except that a backbone whose kind `over` changes keeps of `under` only the fields of its new kind. A field of
    another kind set in `over` itself is still refused by validation."""
    backbones, changed = under.get("backbones"), over.get("backbones")
    if not isinstance(backbones, Mapping) or not isinstance(changed, Mapping):
        return _merged(under, over)
    kept = dict(backbones)
    for role, table in changed.items():
        below = backbones.get(role)
        if not isinstance(table, Mapping) or not isinstance(below, Mapping) or table.get("kind") == below.get("kind"):
            continue
        fields = kind_fields(table.get("kind"))
        if fields is not None:
            kept[role] = {key: value for key, value in below.items() if key in fields}
    return _merged({**under, "backbones": kept}, over)


def _merged(under: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """`over` merged into `under`: tables key by key, every other value replaced."""
    out = dict(under)
    for key, value in over.items():
        below = out.get(key)
        out[key] = _merged(below, value) if isinstance(below, Mapping) and isinstance(value, Mapping) else value
    return out


def _absolute_paths(tables: Mapping[str, Any], base: Path) -> dict[str, Any]:
    """Relative path fields (the backbones' too) made absolute against `base`, so a later base leaves them be."""
    resolved = _resolve_paths(dict(tables), base)
    backbones = tables.get("backbones")
    if isinstance(backbones, Mapping):
        resolved["backbones"] = _resolve_paths(dict(backbones), base, dict.fromkeys(backbones, BACKBONE_PATH_FIELDS))
    return _stringified(resolved)


def _stringified(tables: Mapping[str, Any]) -> dict[str, Any]:
    """Paths back to strings, as TOML gives them (validation converts them once, at the end)."""
    return {
        key: _stringified(value) if isinstance(value, Mapping) else str(value) if isinstance(value, Path) else value
        for key, value in tables.items()
    }


_OVERRIDE_KEY = re.compile(r"^[A-Za-z_][\w-]*(\.[A-Za-z_][\w-]*)+$")


def parse_overrides(overrides: Sequence[str]) -> dict[str, Any]:
    """`section.key=value` strings as nested tables; the value read as TOML, else as a plain string."""
    tables: dict[str, Any] = {}
    for item in overrides:
        key, equals, raw = item.partition("=")
        key = key.strip()
        if not equals or not _OVERRIDE_KEY.match(key):
            raise ConfigError(f"--set {item}: expected SECTION.KEY=VALUE, e.g. --set program.local_k=32")
        try:
            value = tomllib.loads(f"value = {raw.strip()}")["value"]
        except tomllib.TOMLDecodeError:
            value = raw.strip()
        *sections, name = key.split(".")
        table = tables
        for section in sections:
            nested = table.setdefault(section, {})
            if not isinstance(nested, dict):
                raise ConfigError(f"--set {item}: {section} is set as a value by another --set")
            table = nested
        table[name] = value
    return tables


# A label longer than this is cut and ends in a digest of the whole, so that two sweeps of long values stay apart.
_LABEL_CHARS = 64


def overrides_label(overrides: Sequence[str]) -> str:
    """A short, readable, filesystem-safe name of `--set` overrides, for a run folder: `program.local_k=3` or
    `program.dynamic_k=4,program.local_k=3`. The same settings always give the same name, in any order (sorted by
    key; a key set twice counts once, with its last value); a long one is cut and ends in a digest of the whole.
    Empty without overrides."""
    latest: dict[str, str] = {}
    for item in overrides:
        key, _, value = item.partition("=")
        latest[key.strip()] = _without_credentials(value.strip())
    label = ",".join(f"{filename_slug(key)}={filename_slug(value, empty='')}" for key, value in sorted(latest.items()))
    if len(label) <= _LABEL_CHARS:
        return label
    digest = hashlib.sha256(label.encode()).hexdigest()[:8]
    return f"{label[: _LABEL_CHARS - 9].rstrip('-.,=')}-{digest}"


def _without_credentials(value: str) -> str:
    """A value as a folder name may show it: a URL as its host, port and path (no scheme, user or password), and any
    registered secret masked."""
    if "://" in value:
        parts = urlsplit(value.strip("\"'"))
        value = parts.netloc.rpartition("@")[2] + parts.path
    return redact_secrets(value)


def filename_slug(text: str, *, empty: str = "run") -> str:
    """`text` as a file name's part: every run of characters other than letters, digits, `_`, `.` and `-` one `-`."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or empty
