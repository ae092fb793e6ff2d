"""`CachedRetriever`: the local pathway's hits searched once, then replayed by every run with no index opened.

The local pathway's query is the question text, so a hit list depends only on the corpus set (backend, corpora,
retriever, merge, encoders: `index_identity.corpus_settings`), k, the query, and the index as built. The file (SQLite,
one file: it can be filled on one big-memory node, `clearmed index warm`, and copied to every worker) keeps per corpus
set the index version it was recorded against and the retriever's name, and per (corpus set, k, query) the passages
returned, provenance included, or the deterministic failure the search met (a query Lucene refuses), so a replay
answers exactly as the live search did.

Modes: `record` searches the live retriever on a miss and stores the result; `replay` never searches: it is built
without a retriever (no index read, no JVM started), and a miss stops the run (`EvidenceError(kind="cache")`, which
the pathway raises as `FatalServiceError`) with one line, instead of answering without the evidence the live run had.
A cache recorded against another index version is refused in one line naming both. Where the index is not on the
machine (the cache copied alone) there is nothing to compare and the cache replays as recorded.

Connections, locking and corruption are `cache.CacheFile`'s, as for the web search cache (recording in WAL mode, whose
commits cost a twentieth of a rollback journal's); replay opens the file read-only, so it may sit on a read-only mount.
Closing a recorder (`index warm` does) turns the file back to a rollback journal: one file, nothing beside it to copy.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
import threading
import warnings
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from clearmed.retrieval.base import FATAL_FAILURES, TRANSIENT_FAILURES, EvidenceError, Retriever, SearchFailure
from clearmed.retrieval.cache import CacheFile, CacheMode, DamagedCacheEntryWarning
from clearmed.signatures.records import Passage

LABEL = "hit cache"
WARM_HINT = 'warm it with `clearmed index warm --benchmark NAME -c CONFIG` (or set corpus.hit_cache_mode = "record")'
_QUERY_SHOWN = 80  # characters of a query a message quotes

_SCHEMA = """
CREATE TABLE IF NOT EXISTS corpus_sets (
    scope TEXT PRIMARY KEY,
    settings TEXT NOT NULL,
    index_version TEXT NOT NULL,
    retriever TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS hits (
    key TEXT PRIMARY KEY,
    scope TEXT NOT NULL,
    k INTEGER NOT NULL,
    query TEXT NOT NULL,
    result TEXT NOT NULL,
    created_at TEXT NOT NULL
);
"""


class StoredFailure(BaseModel):
    """A search that failed the same way every time (a query the index refuses): replayed as that failure."""

    model_config = ConfigDict(extra="forbid")

    kind: SearchFailure
    message: str
    backend: str = ""


class StoredHits(BaseModel):
    """One row's result: the passages returned, or the failure met."""

    model_config = ConfigDict(extra="forbid")

    passages: list[Passage] = []
    failure: StoredFailure | None = None


class CorpusSetRow(BaseModel):
    """What the file knows of one corpus set."""

    model_config = ConfigDict(extra="forbid")

    settings: str
    index_version: str
    retriever: str


def shown(query: str) -> str:
    return repr(query if len(query) <= _QUERY_SHOWN else query[:_QUERY_SHOWN] + "...")


class CachedRetriever:
    """Implements `Retriever` for one corpus set: `record` through `inner` (the live retriever), or `replay` with
    none. `settings` is the corpus set (JSON data), `version` the index's (None in replay: not on this machine)."""

    def __init__(
        self,
        inner: Retriever | None,
        path: Path | str,
        mode: CacheMode,  # "off" builds no cache (retrieval.factory), so it is refused here
        *,
        settings: Mapping[str, object],
        version: str | None,
        busy_timeout: float = 5.0,
    ) -> None:
        if mode not in ("record", "replay"):
            raise ValueError(f"hit cache mode must be record or replay, got {mode!r}")
        if mode == "record" and (inner is None or version is None):
            raise ValueError("recording hits needs the live retriever and its index version")
        self.inner = inner if mode == "record" else None  # replay never searches
        self.path = Path(path)
        self.mode: CacheMode = mode
        self.settings = json.dumps(dict(settings), sort_keys=True, ensure_ascii=False, default=str)
        self.scope = hashlib.sha256(self.settings.encode("utf-8")).hexdigest()
        self.hits = 0
        self.misses = 0
        self._stats_lock = threading.Lock()
        if mode == "replay" and not self.path.is_file():
            raise EvidenceError(f"{LABEL} {self.path} does not exist; {WARM_HINT}", kind="cache", backend=LABEL)
        self._file = CacheFile(
            self.path,
            schema=_SCHEMA,
            label=LABEL,
            backend=LABEL,
            busy_timeout=busy_timeout,
            create=mode == "record",
            read_only=mode == "replay",
        )
        known = self._corpus_set()
        if known is None and inner is not None and version is not None:
            known = self._add_corpus_set(version, inner.name)
        if known is None:
            raise EvidenceError(self._unknown_corpus_set(), kind="cache", backend=LABEL)
        if version is not None and known.index_version != version:
            raise EvidenceError(
                f"{LABEL} {self.path} was recorded against index version {known.index_version}, but the index is "
                f"version {version} now; warm the cache again for this index or point corpus.hit_cache elsewhere",
                kind="cache",
                backend=LABEL,
            )
        self.index_version = known.index_version
        self.name = known.retriever

    # ----------------------------------------------------------------------------------------- corpus sets

    def _corpus_set(self) -> CorpusSetRow | None:
        query = "SELECT settings, index_version, retriever FROM corpus_sets WHERE scope = ?"
        try:
            with self._file.connection() as conn:
                row = conn.execute(query, (self.scope,)).fetchone()
        except sqlite3.OperationalError as exc:
            if "no such table" not in str(exc):  # a replayed file was never made by a recorder: a web cache, say
                raise self._file.error(exc) from None
            raise EvidenceError(f"{LABEL} {self.path} is not a hit cache ({exc}); {WARM_HINT}", kind="cache") from None
        except sqlite3.Error as exc:
            raise self._file.error(exc) from None
        return None if row is None else CorpusSetRow(settings=row[0], index_version=row[1], retriever=row[2])

    def _add_corpus_set(self, version: str, retriever: str) -> CorpusSetRow:
        row = (self.scope, self.settings, version, retriever, _now())
        try:
            with self._file.connection() as conn, conn:
                conn.execute("INSERT OR IGNORE INTO corpus_sets VALUES (?, ?, ?, ?, ?)", row)
        except sqlite3.Error as exc:
            raise self._file.error(exc) from None
        known = self._corpus_set()  # another recorder may have been first: its row stands
        assert known is not None
        return known

    def _unknown_corpus_set(self) -> str:
        try:
            with self._file.connection() as conn:
                held = [row[0] for row in conn.execute("SELECT settings FROM corpus_sets ORDER BY created_at")]
        except sqlite3.Error as exc:
            raise self._file.error(exc) from None
        holds = "; it holds " + " and ".join(held) if held else "; it is empty"
        return f"{LABEL} {self.path} has no hits of the corpus set {self.settings}{holds}: {WARM_HINT}"

    # ----------------------------------------------------------------------------------------- hits

    def key(self, query: str, k: int) -> str:
        return hashlib.sha256(json.dumps([self.scope, k, query], ensure_ascii=False).encode("utf-8")).hexdigest()

    def _lookup(self, key: str, query: str) -> StoredHits | None:
        try:
            with self._file.connection() as conn:
                row = conn.execute("SELECT result FROM hits WHERE key = ?", (key,)).fetchone()
        except sqlite3.Error as exc:
            raise self._file.error(exc) from None
        if row is None:
            return None
        try:
            return StoredHits.model_validate_json(row[0])
        except ValidationError as exc:
            if self.mode == "replay":  # nothing to search it again with
                raise EvidenceError(
                    f"{LABEL} {self.path}: the stored hits of {shown(query)} are unreadable "
                    f"({exc.error_count()} validation errors); warm the cache again",
                    kind="cache",
                    backend=LABEL,
                ) from None
            warnings.warn(
                f"{LABEL} {self.path}: the stored hits of {shown(query)} were unreadable; dropped and searched again",
                DamagedCacheEntryWarning,
                stacklevel=3,
            )
            return None

    def _store(self, key: str, query: str, k: int, result: StoredHits) -> None:
        row = (key, self.scope, k, query, result.model_dump_json(exclude_defaults=True), _now())
        try:
            with self._file.connection() as conn, conn:
                conn.execute("INSERT OR REPLACE INTO hits VALUES (?, ?, ?, ?, ?, ?)", row)
        except sqlite3.Error as exc:
            raise self._file.error(exc) from None

    def retrieve(self, query: str, k: int) -> list[Passage]:
        key = self.key(query, k)
        stored = self._lookup(key, query)
        with self._stats_lock:
            if stored is None:
                self.misses += 1
            else:
                self.hits += 1
        if stored is None:
            stored = self._search(key, query, k)
        if stored.failure is not None:
            failure = stored.failure
            raise EvidenceError(failure.message, kind=failure.kind, backend=failure.backend)
        return list(stored.passages)

    def _search(self, key: str, query: str, k: int) -> StoredHits:
        if self.inner is None:
            raise EvidenceError(
                f"{LABEL} {self.path} has no hits for k={k} and the query {shown(query)}; replay never searches the "
                f"index: {WARM_HINT}",
                kind="cache",
                backend=LABEL,
            )
        try:
            result = StoredHits(passages=self.inner.retrieve(query, k))
        except EvidenceError as exc:
            if exc.kind in TRANSIENT_FAILURES or exc.kind in FATAL_FAILURES:
                raise  # a later search may pass, or none will: neither is the query's own answer
            result = StoredHits(failure=StoredFailure(kind=exc.kind, message=str(exc), backend=exc.backend))
        self._store(key, query, k, result)
        return result

    def __len__(self) -> int:
        """The hit lists stored for this corpus set."""
        try:
            with self._file.connection() as conn:
                return int(conn.execute("SELECT COUNT(*) FROM hits WHERE scope = ?", (self.scope,)).fetchone()[0])
        except sqlite3.Error as exc:
            raise self._file.error(exc) from None

    @property
    def open_connections(self) -> int:
        return self._file.open_connections

    def close(self) -> None:
        """Close the file (a recorder's out of WAL mode, unless another process has it open) and the live retriever."""
        self._file.close()
        if self.mode == "record":
            with contextlib.suppress(sqlite3.Error), contextlib.closing(sqlite3.connect(self.path, timeout=0)) as conn:
                conn.execute("PRAGMA journal_mode=DELETE")
        closer = getattr(self.inner, "close", None)
        if callable(closer):
            closer()


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
