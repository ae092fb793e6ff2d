"""A run folder: the manifest, one JSONL line per finished question, and the lock that guards them.

Lines are appended with a single write and fsynced as each question finishes, so a killed run loses at most
the question in flight. On reopening, a torn last line (the kill landed mid-write) is cut off and that
question is simply redone; a damaged line anywhere else is reported, never silently dropped. Two processes
can never write one folder: the second is refused while the first holds the lock.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from clearmed.metrics import QuestionScore
from clearmed.signatures.records import Decision

MANIFEST = "manifest.json"
RESULTS = "results.jsonl"
LOCK = ".lock"


class RunStoreError(Exception):
    """The run folder cannot be used as asked (locked, mismatched, damaged)."""


class RunManifest(BaseModel):
    """What a run is: fixed at creation, checked on every resume."""

    model_config = ConfigDict(extra="forbid")

    program: str
    benchmark: str
    source: str
    config_source: str
    config_digest: str
    limit: int | None = None
    seed: int = 0
    question_ids: list[str]
    created: str
    clearmed_version: str
    note: str = ""
    artifact: str | None = Field(default=None, description="the --program-artifact folder the program was loaded from")


class EvalRecord(BaseModel):
    """One evaluated question: the decision with its whole trail, its score and its wall time."""

    model_config = ConfigDict(extra="forbid")

    question_id: str
    index: int
    program: str
    decision: Decision
    score: QuestionScore | None = None
    seconds: float = Field(ge=0)
    finished: str


class RunStore:
    """Open (or create) a run folder for writing. Use as a context manager: the lock lives as long as it."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._lock_handle: int | None = None
        self._write_lock = threading.Lock()

    # ----------------------------------------------------------------------------------------- locking

    def __enter__(self) -> RunStore:
        self.directory.mkdir(parents=True, exist_ok=True)
        handle = os.open(self.directory / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(handle, 64, 0).decode(errors="replace").strip() or "another process"
            os.close(handle)
            raise RunStoreError(
                f"{self.directory} is being written by another clearmed eval (pid {holder}); "
                "wait for it, or choose another --run-dir"
            ) from None
        os.ftruncate(handle, 0)
        os.pwrite(handle, str(os.getpid()).encode(), 0)
        self._lock_handle = handle
        return self

    def __exit__(self, *exc: object) -> None:
        if self._lock_handle is not None:
            fcntl.flock(self._lock_handle, fcntl.LOCK_UN)
            os.close(self._lock_handle)
            self._lock_handle = None

    # ----------------------------------------------------------------------------------------- manifest

    @property
    def manifest_path(self) -> Path:
        return self.directory / MANIFEST

    @property
    def results_path(self) -> Path:
        return self.directory / RESULTS

    def read_manifest(self) -> RunManifest | None:
        if not self.manifest_path.exists():
            return None
        try:
            return RunManifest.model_validate_json(self.manifest_path.read_text(encoding="utf-8"))
        except (ValidationError, OSError) as err:
            raise RunStoreError(f"{self.manifest_path}: unreadable manifest: {err}") from None

    def write_manifest(self, manifest: RunManifest) -> None:
        temporary = self.manifest_path.with_suffix(".tmp")
        temporary.write_text(manifest.model_dump_json(indent=2), encoding="utf-8")
        os.replace(temporary, self.manifest_path)

    def write_json(self, name: str, payload: str) -> Path:
        path = self.directory / name
        temporary = path.with_suffix(path.suffix + ".tmp")
        temporary.write_text(payload, encoding="utf-8")
        os.replace(temporary, path)
        return path

    # ----------------------------------------------------------------------------------------- results

    def repair_torn_tail(self) -> int:
        """Cut a last line that a kill left without its newline; return the bytes removed."""
        path = self.results_path
        if not path.exists():
            return 0
        size = path.stat().st_size
        if size == 0:
            return 0
        with path.open("rb+") as handle:
            handle.seek(-1, os.SEEK_END)
            if handle.read(1) == b"\n":
                return 0
            data = path.read_bytes()
            keep = data.rfind(b"\n") + 1
            handle.truncate(keep)
            handle.flush()
            os.fsync(handle.fileno())
            return size - keep

    def append(self, record: EvalRecord) -> None:
        line = (record.model_dump_json() + "\n").encode("utf-8")
        with self._write_lock:
            handle = os.open(self.results_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                written = os.write(handle, line)
                if written != len(line):  # a short write would leave a torn line; finish it
                    os.write(handle, line[written:])
                os.fsync(handle)
            finally:
                os.close(handle)


def read_records(directory: Path) -> Iterator[EvalRecord]:
    """Every complete record of a run folder (a torn last line is ignored, a damaged middle line is not)."""
    path = directory / RESULTS
    if not path.exists():
        return
    lines = path.read_bytes().split(b"\n")
    last = len(lines) - 1
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            yield EvalRecord.model_validate(json.loads(raw))
        except (ValueError, ValidationError) as err:
            if number - 1 == last:  # no newline after it: a torn tail, redone on resume
                return
            raise RunStoreError(f"{path}:{number}: damaged result line: {str(err).splitlines()[0]}") from None
