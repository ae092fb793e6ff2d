"""`CachedWebSearch`: a SQLite search cache that makes reruns free and evaluations reproducible offline.

Keyed by (backend name, query, max_results, backend parameters); stores the returned passages as JSON.
Modes: `record` serves hits and stores misses, `replay` serves hits only (a miss is an error: a replayed
evaluation must not silently search the live web), `off` passes through. WAL journal, busy timeout.

Connections are pooled, not kept per thread (`CacheFile`, which the local pathway's hit cache, `hit_cache`, shares):
each lookup or store borrows an idle connection (opening one only when every other is in use) and gives it back, so
a run holds as many connections as it has concurrent searches, however many threads come and go.

Every failure is fatal or transient, never an empty search. A file that is not a database, or one that cannot be
written (read-only, disk full), fails every later search too: `EvidenceError(kind="cache")`, which the pathways raise as
`FatalServiceError` (`retrieval.base.FATAL_FAILURES`), so the run stops with one line. A cache locked by another process past the busy timeout, or a connection the process cannot open (no file descriptors left),
may pass: `EvidenceError(kind="busy")`, the question is degraded and redone on resume. One damaged entry is dropped
with a warning (`DamagedCacheEntryWarning`) and searched again.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import sqlite3
import threading
import warnings
from collections.abc import Iterator, Mapping
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


class DamagedCacheEntryWarning(UserWarning):
    """A stored search that would not load was dropped from the cache and searched again."""


class CacheFile:
    """One SQLite cache file behind a pool of connections, its failures as `EvidenceError`s naming it (`label`).

    Each block borrows an idle connection (opening one only when every other is in use) and gives it back. With
    `read_only` the file is opened read-only and left as it is (no journal mode, no schema); where SQLite cannot open
    it so (a WAL file in a folder this process cannot write, a file system whose locks fail), it is read as immutable:
    a cache that only replays does not change."""

    def __init__(
        self,
        path: Path,
        *,
        schema: str,
        label: str,
        backend: str,
        busy_timeout: float = 5.0,
        create: bool = False,
        read_only: bool = False,
    ) -> None:
        self.path = path
        self.label = label
        self.backend = backend
        self.busy_timeout = busy_timeout
        self._schema = schema
        self._create = create
        self._read_only = read_only
        self._lock = threading.Lock()
        self._idle: list[sqlite3.Connection] = []  # open connections no block is using
        self._connections: list[sqlite3.Connection] = []

    @contextlib.contextmanager
    def connection(self) -> Iterator[sqlite3.Connection]:
        """An idle pooled connection (a new one when none is idle), given back when the block ends."""
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            conn = self._open()
        try:
            yield conn
        finally:
            with self._lock:
                if conn in self._connections:  # not closed meanwhile
                    self._idle.append(conn)

    def _open(self) -> sqlite3.Connection:
        try:
            if self._create:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = self._read_only_connection() if self._read_only else self._writable_connection()
        except sqlite3.Error as exc:
            raise self.error(exc) from None
        except OSError as exc:
            raise self._os_error(exc) from None
        with self._lock:
            self._connections.append(conn)
        return conn

    def _connect(self, target: str | Path, *, uri: bool = False) -> sqlite3.Connection:
        # Shared by whichever thread borrows it, one at a time.
        return sqlite3.connect(target, uri=uri, timeout=self.busy_timeout, check_same_thread=False)

    def _writable_connection(self) -> sqlite3.Connection:
        conn = self._connect(self.path)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.executescript(self._schema)
            conn.commit()
        except BaseException:
            conn.close()
            raise
        return conn

    def _read_only_connection(self) -> sqlite3.Connection:
        uri = self.path.resolve().as_uri()
        try:
            return _probed(self._connect(f"{uri}?mode=ro", uri=True))
        except sqlite3.OperationalError:
            return _probed(self._connect(f"{uri}?immutable=1", uri=True))

    def _os_error(self, exc: OSError) -> EvidenceError:
        if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOMEM):
            return EvidenceError(f"{self.label} {self.path}: {exc.strerror}", kind="busy", backend=self.backend)
        return EvidenceError(f"{self.label} {self.path}: {exc.strerror or exc}", kind="cache", backend=self.backend)

    def error(self, exc: sqlite3.Error) -> EvidenceError:
        """A SQLite failure as the `EvidenceError` a pathway understands: busy (may pass) or cache (fatal)."""
        text = str(exc)
        if "locked" in text or "busy" in text:
            message = (
                f"{self.label} {self.path} is locked by another process for more than "
                f"{self.busy_timeout:g} s; wait for it or use another cache path"
            )
            return EvidenceError(message, kind="busy", backend=self.backend)
        if "unable to open" in text and self.path.exists():
            # The file is there but no connection opens: most often no descriptor is left. A later attempt may pass.
            return EvidenceError(f"{self.label} {self.path}: {text}", kind="busy", backend=self.backend)
        if isinstance(exc, sqlite3.DatabaseError) and ("not a database" in text or "malformed" in text):
            message = f"{self.label} {self.path} is corrupt ({text}); delete it or point the cache elsewhere"
        else:
            message = f"{self.label} {self.path}: {text}"
        return EvidenceError(message, kind="cache", backend=self.backend)

    def close(self) -> None:
        with self._lock:
            for conn in self._connections:
                with contextlib.suppress(sqlite3.Error):
                    conn.close()
            self._connections.clear()
            self._idle.clear()

    @property
    def open_connections(self) -> int:
        with self._lock:
            return len(self._connections)


def _probed(conn: sqlite3.Connection) -> sqlite3.Connection:
    """`conn`, once it has read the schema (a file that is no database fails here), else closed."""
    try:
        conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
    except BaseException:
        conn.close()
        raise
    return conn


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
        self._file = CacheFile(
            self.path,
            schema=_SCHEMA,
            label="search cache",
            backend=self.name,
            busy_timeout=busy_timeout,
            create=mode == "record",
        )
        if mode == "replay" and not self.path.is_file():
            raise EvidenceError(
                f"search cache {self.path} does not exist; record it first (cache mode 'record')",
                kind="cache",
                backend=self.name,
            )
        if mode != "off":
            with self._file.connection():  # fail at construction on a corrupt or unwritable file, not mid-evaluation
                pass

    def close(self) -> None:
        self._file.close()

    @property
    def open_connections(self) -> int:
        return self._file.open_connections

    # ----------------------------------------------------------------------------------------- keys

    def key(self, query: str, max_results: int) -> tuple[str, str]:
        """(digest, canonical JSON) of what identifies a search."""
        params = json.dumps({"max_results": max_results, **self.params}, sort_keys=True, default=str)
        canonical = json.dumps([self.name, query, params], ensure_ascii=False)
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest(), params

    def _lookup(self, digest: str, query: str) -> list[Passage] | None:
        try:
            with self._file.connection() as conn:
                row = conn.execute("SELECT passages FROM searches WHERE key = ?", (digest,)).fetchone()
        except sqlite3.Error as exc:
            raise self._file.error(exc) from None
        if row is None:
            return None
        try:
            return [Passage.model_validate(item) for item in json.loads(row[0])]
        except (json.JSONDecodeError, ValidationError, TypeError) as exc:
            if self.mode == "replay":  # nothing to refetch it from
                raise EvidenceError(
                    f"search cache {self.path}: stored results for {query!r} are unreadable "
                    f"({type(exc).__name__}); re-record them (cache mode 'record')",
                    kind="cache_miss",
                    backend=self.name,
                ) from None
            warnings.warn(
                f"search cache {self.path}: stored results for {query!r} were unreadable ({type(exc).__name__}); "
                "dropped and searched again",
                DamagedCacheEntryWarning,
                stacklevel=3,
            )
            self._drop(digest)
            return None

    def _drop(self, digest: str) -> None:
        try:
            with self._file.connection() as conn, conn:
                conn.execute("DELETE FROM searches WHERE key = ?", (digest,))
        except sqlite3.Error as exc:
            raise self._file.error(exc) from None

    def _store(self, digest: str, query: str, params: str, passages: list[Passage]) -> None:
        payload = json.dumps([p.model_dump(mode="json") for p in passages], ensure_ascii=False)
        try:
            with self._file.connection() as conn, conn:
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
            raise self._file.error(exc) from None

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
            with self._file.connection() as conn:
                return int(conn.execute("SELECT COUNT(*) FROM searches").fetchone()[0])
        except sqlite3.Error as exc:
            raise self._file.error(exc) from None
