"""`CachedWebSearch`: a SQLite search cache that makes reruns free and evaluations reproducible offline.

Keyed by (backend name, query, max_results, backend parameters); stores the returned passages as JSON.
Modes: `record` serves hits and stores misses, `replay` serves hits only (a miss is an error: a replayed
evaluation must not silently search the live web), `off` passes through. One connection per thread, WAL
journal, busy timeout.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
import threading
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import ValidationError

from clearmed.retrieval.base import EvidenceError, WebSearch
from clearmed.signatures.records import Passage

CacheMode = Literal["record", "replay", "off"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS searches (
    key TEXT PRIMARY KEY,
    backend TEXT NOT NULL,
    query TEXT NOT NULL,
    params TEXT NOT NULL,
    passages TEXT NOT NULL,
    created_at TEXT NOT NULL
)
"""


class CachedWebSearch:
    """Wraps any `WebSearch`; implements `WebSearch` under the inner backend's name."""

    def __init__(
        self,
        inner: WebSearch,
        path: Path | str,
        mode: CacheMode = "record",
        *,
        params: Mapping[str, object] | None = None,
        busy_timeout: float = 5.0,
    ) -> None:
        if mode not in ("record", "replay", "off"):
            raise ValueError(f"cache mode must be record, replay or off, got {mode!r}")
        self.inner = inner
        self.name = inner.name
        self.max_query_chars = inner.max_query_chars
        self.path = Path(path)
        self.mode: CacheMode = mode
        self.busy_timeout = busy_timeout
        # Backend settings that change results (search depth, domains ...) are part of the key.
        own = getattr(inner, "cache_params", None)
        self.params: dict[str, object] = dict(own() if callable(own) else {})
        self.params.update(params or {})
        self.hits = 0
        self.misses = 0
        self._stats_lock = threading.Lock()
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        if mode == "replay" and not self.path.is_file():
            raise EvidenceError(
                f"search cache {self.path} does not exist; record it first (cache mode 'record')",
                kind="cache",
                backend=self.name,
            )
        if mode != "off":
            self._connection()  # fail at construction on a corrupt or unwritable file, not mid-evaluation

    # ----------------------------------------------------------------------------------------- sqlite

    def _connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            return conn
        try:
            if self.mode == "record":
                self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=self.busy_timeout)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(_SCHEMA)
            conn.commit()
        except sqlite3.Error as exc:
            raise self._db_error(exc) from None
        except OSError as exc:
            raise EvidenceError(f"search cache {self.path}: {exc}", kind="cache", backend=self.name) from None
        self._local.conn = conn
        with self._stats_lock:
            self._connections.append(conn)
        return conn

    def _db_error(self, exc: sqlite3.Error) -> EvidenceError:
        text = str(exc)
        if "locked" in text or "busy" in text:
            message = (
                f"search cache {self.path} is locked by another process for more than "
                f"{self.busy_timeout:g} s; wait for it or use another cache path"
            )
        elif isinstance(exc, sqlite3.DatabaseError) and ("not a database" in text or "malformed" in text):
            message = f"search cache {self.path} is corrupt ({text}); delete it or point the cache elsewhere"
        else:
            message = f"search cache {self.path}: {text}"
        return EvidenceError(message, kind="cache", backend=self.name)

    def close(self) -> None:
        with self._stats_lock:
            for conn in self._connections:
                with contextlib.suppress(sqlite3.Error):
                    conn.close()
            self._connections.clear()
        self._local = threading.local()

    # ----------------------------------------------------------------------------------------- keys

    def key(self, query: str, max_results: int) -> tuple[str, str]:
        """(digest, canonical JSON) of what identifies a search."""
        params = json.dumps({"max_results": max_results, **self.params}, sort_keys=True, default=str)
        canonical = json.dumps([self.name, query, params], ensure_ascii=False)
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest(), params

    def _lookup(self, digest: str, query: str) -> list[Passage] | None:
        try:
            row = self._connection().execute("SELECT passages FROM searches WHERE key = ?", (digest,)).fetchone()
        except sqlite3.Error as exc:
            raise self._db_error(exc) from None
        if row is None:
            return None
        try:
            return [Passage.model_validate(item) for item in json.loads(row[0])]
        except (json.JSONDecodeError, ValidationError, TypeError) as exc:
            raise EvidenceError(
                f"search cache {self.path}: stored results for {query!r} are unreadable "
                f"({type(exc).__name__}); delete the cache or re-record",
                kind="cache",
                backend=self.name,
            ) from None

    def _store(self, digest: str, query: str, params: str, passages: list[Passage]) -> None:
        payload = json.dumps([p.model_dump(mode="json") for p in passages], ensure_ascii=False)
        conn = self._connection()
        try:
            with conn:
                conn.execute(
                    "INSERT OR REPLACE INTO searches VALUES (?, ?, ?, ?, ?, ?)",
                    (
                        digest,
                        self.name,
                        query,
                        params,
                        payload,
                        datetime.now(UTC).isoformat(timespec="seconds"),
                    ),
                )
        except sqlite3.Error as exc:
            raise self._db_error(exc) from None

    # ----------------------------------------------------------------------------------------- WebSearch

    def search(self, query: str, max_results: int) -> list[Passage]:
        if self.mode == "off":
            return self.inner.search(query, max_results)
        digest, params = self.key(query, max_results)
        cached = self._lookup(digest, query)
        with self._stats_lock:
            if cached is None:
                self.misses += 1
            else:
                self.hits += 1
        if cached is not None:
            return cached
        if self.mode == "replay":
            raise EvidenceError(
                f"search cache {self.path} has no results for query {query!r} "
                f"(backend {self.name}, max_results {max_results}); replay mode never searches live",
                kind="cache_miss",
                backend=self.name,
            )
        passages = self.inner.search(query, max_results)
        self._store(digest, query, params, passages)
        return passages

    def __len__(self) -> int:
        try:
            return int(self._connection().execute("SELECT COUNT(*) FROM searches").fetchone()[0])
        except sqlite3.Error as exc:
            raise self._db_error(exc) from None
