"""A run folder: the manifest, one JSONL line per finished question, and the lock that guards them.

Lines are appended with a single write and fsynced as each question finishes, so a killed run loses at most
the question in flight. A record is validated as it will be read back before it is written (`writable_line`), so
a record that would not load (a NaN written as null, a lone surrogate that is no UTF-8) is refused for its question
and never reaches the file.

Reading skips any line that is not a valid record, whether torn (a kill landed mid-write: no newline after it) or
damaged (anywhere else), with one warning naming the file and the line (`UnreadableResultWarning`) and a count
(`scan_results`): one bad line never stops a run from being read, and its question counts as not done. A resume
moves such lines to results.unreadable.jsonl (`set_aside_unreadable`: a torn tail must go before the next append,
and a damaged line goes the same way) and redoes their questions. A resume likewise moves degraded records (a stage
failed after its retries: `EvalRecord.degraded_stages`) to results.degraded.jsonl and redoes those questions
(`set_aside_degraded`), so results.jsonl keeps one line per question. Two processes can never write one folder: the
second is refused while the first holds the lock.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import threading
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import PydanticSerializationError

from clearmed.core.sanitize import redact_secrets
from clearmed.evaluation.shard import RunShard
from clearmed.metrics import QuestionScore
from clearmed.signatures.records import Decision, Question

MANIFEST = "manifest.json"
RESULTS = "results.jsonl"
UNREADABLE = "results.unreadable.jsonl"  # lines set aside on resume: not valid records, kept for inspection
DEGRADED = "results.degraded.jsonl"  # degraded records set aside on resume, their questions redone (and paid for)
LOCK = ".lock"

# The layout of a run folder's records. Schema 2 (clearmed 0.2.0) dropped the fields and settings issue 26 removed
# (the letter-prior correction, stated confidence, the confidence gates, the calibrated re-search); clearmed 0.1.0
# wrote schema 1, with no `schema_version` in its manifests, and is the last version that reads them.
RUN_SCHEMA_VERSION = 2
_SCHEMA_READERS = {1: "clearmed 0.1.0 (pip install 'clearmed==0.1.0')"}


class RunStoreError(Exception):
    """The run folder cannot be used as asked (locked, mismatched, damaged)."""


class UnwritableRecordError(RunStoreError):
    """A question's record would not load back as written: it is not written (the runner writes a failed record in
    its place)."""


class UnreadableResultWarning(UserWarning):
    """A line of results.jsonl that is not a valid record was skipped (its question counts as not done)."""


class RunManifest(BaseModel):
    """What a run is: fixed at creation, checked on every resume."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = RUN_SCHEMA_VERSION
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
    recorded_pathways: dict[str, str] = Field(
        default_factory=dict, description="pathways read from recorded runs (--pathway): the folder, or 'absent'"
    )
    overrides: list[str] = Field(
        default_factory=list,
        description="the --set overrides the run began with (a sweep's cell), secrets masked; the config digest, not "
        "these, decides whether a resume is the same run",
    )
    dataset_revision: str | None = Field(
        default=None,
        description="the hub revision the benchmark was read at (--revision): the commit the hub resolved where the "
        "datasets cache says it, else the revision asked; None for a local file or an unknown commit",
    )
    shard: RunShard | None = Field(
        default=None, description="this run is one shard of a larger run (--shard K/N; clearmed.evaluation.shard)"
    )
    question_digests: dict[str, str] | None = Field(
        default=None,
        description="question id -> a digest of what it asks and its gold (`question_digest`), so that a resume on a "
        "benchmark file changed since is refused; None in runs made before it was recorded",
    )
    endpoints: dict[str, list[str]] = Field(
        default_factory=dict,
        description="where the run reached each service, by role (a backbone's api_base, Tavily's as `search`), every "
        "address it used in the order first used: not part of what the run is, so a resume on a moved server adds it",
    )


class EvalRecord(BaseModel):
    """One evaluated question: the decision with its whole trail, its score, its wall time and what it cost.

    `degraded_stages` names the stages that failed after their retries (clearmed.evaluation.degraded): a degraded
    question is reported apart from clean answers and redone on resume. `cost_usd` is the LM dollars of its calls at
    the backbones' prices when it finished (None: a price was unknown)."""

    model_config = ConfigDict(extra="forbid")

    question_id: str
    index: int
    program: str
    decision: Decision
    score: QuestionScore | None = None
    seconds: float = Field(ge=0)
    finished: str
    degraded_stages: list[str] = Field(default_factory=list)
    cost_usd: float | None = Field(default=None, ge=0)

    @property
    def degraded(self) -> bool:
        return bool(self.degraded_stages)

    @property
    def counted_correct(self) -> bool | None:
        """Scored correct, a degraded answer counting wrong; None for a question with no score or a rubric grade."""
        if self.score is None or self.score.rubric_grade is not None:
            return None
        return self.score.correct and not self.degraded


class RunStore:
    """Open (or create) a run folder for writing. Use as a context manager: the lock lives as long as it."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
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
        return load_manifest(self.manifest_path) if self.manifest_path.exists() else None

    def write_manifest(self, manifest: RunManifest) -> None:
        temporary = self.manifest_path.with_suffix(".tmp")
        temporary.write_text(manifest.model_dump_json(indent=2), encoding="utf-8")
        os.replace(temporary, self.manifest_path)

    def write_json(self, name: str, payload: str) -> Path:
        return self.write_bytes(name, payload.encode("utf-8"))

    def write_bytes(self, name: str, content: bytes) -> Path:
        """Write the folder's file `name` in one rename: a kill leaves the old file or the new one, never half."""
        path = self.directory / name
        temporary = path.with_suffix(path.suffix + ".tmp")
        temporary.write_bytes(content)
        os.replace(temporary, path)
        return path

    # ----------------------------------------------------------------------------------------- results

    def set_aside_unreadable(self) -> ResultsScan:
        """Move every line that is not a valid record out of results.jsonl into results.unreadable.jsonl, and return
        the valid records and the lines moved (their questions count as not done: the run redoes them).

        A torn last line is one such line: left in place, the next append would continue it. The lines are kept,
        never dropped; the results file is replaced in one rename, so a kill leaves either file whole."""
        self._check_open()
        scan = _scan(self.results_path)
        if scan.skipped:
            self._move_lines({line.number: line.raw for line in scan.skipped}, UNREADABLE)
        return scan

    def set_aside_degraded(self) -> list[EvalRecord]:
        """Move every degraded record out of results.jsonl into results.degraded.jsonl and return them: their
        questions count as not done, so the run redoes them. Call after `set_aside_unreadable` (every line valid)."""
        self._check_open()
        numbered = _numbered_records(self.results_path)
        degraded = {number: record for number, record in numbered if record.degraded}
        if degraded:
            lines = self.results_path.read_bytes().split(b"\n")
            self._move_lines({number: lines[number - 1] for number in degraded}, DEGRADED)
        return list(degraded.values())

    def _check_open(self) -> None:
        if self._lock_handle is None:
            raise RunStoreError(f"{self.directory}: open the run store (with RunStore(...)) before repairing it")

    def _move_lines(self, moved: dict[int, bytes], aside_name: str) -> None:
        """Move these lines (by 1-based number) from results.jsonl to `aside_name`. The lines are kept, never dropped,
        and written aside once: the aside file is rewritten whole in one rename with the lines it lacks, then the
        results file is replaced in another. A kill between the two leaves the lines in both, and the next move finds
        them already aside and does not add them twice (a degraded question's cost is never counted twice)."""
        lines = self.results_path.read_bytes().split(b"\n")
        kept = b"".join(raw + b"\n" for number, raw in enumerate(lines, start=1) if raw.strip() and number not in moved)
        aside = self.directory / aside_name
        before = aside.read_bytes() if aside.exists() else b""
        if before and not before.endswith(b"\n"):
            before += b"\n"
        present = set(before.split(b"\n"))
        added = [raw for _, raw in sorted(moved.items()) if raw not in present]
        if added:
            _replace_durably(aside, before + b"".join(raw + b"\n" for raw in added))
        _replace_durably(self.results_path, kept)

    def append(self, record: EvalRecord) -> None:
        """Append one record as one fsynced line; `UnwritableRecordError` (nothing written) if it would not load."""
        line = writable_line(record)
        with self._write_lock:
            handle = os.open(self.results_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                written = os.write(handle, line)
                if written != len(line):  # a short write would leave a torn line; finish it
                    os.write(handle, line[written:])
                os.fsync(handle)
            finally:
                os.close(handle)


def question_digest(question: Question) -> str:
    """A fingerprint of what a question asks and what counts as right: its text, answer mode, options, context,
    conversation, gold letters, gold text and rubric (not its metadata). A resume compares it with the manifest's, so
    a benchmark file edited since the run began (a gold mended, a row inserted that moves the ids) is refused."""
    payload = question.model_dump(
        mode="json",
        include={"text", "answer_mode", "options", "context", "conversation", "gold_letters", "gold_text", "rubric"},
    )
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def load_manifest(path: str | Path) -> RunManifest:
    """A run folder's manifest (the manifest.json, or the folder holding it); a run of another schema is refused in
    one line naming the version that reads it."""
    path = Path(path)
    if path.is_dir():
        path = path / MANIFEST
    if not path.is_file():
        raise RunStoreError(f"{path.parent}: no {path.name} (is it a run folder?)")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        version = data.get("schema_version", 1) if isinstance(data, dict) else None
    except (OSError, ValueError) as err:
        raise RunStoreError(f"{path}: unreadable manifest: {err}") from None
    if isinstance(version, int) and version != RUN_SCHEMA_VERSION:
        reader = _SCHEMA_READERS.get(version, "a newer clearmed (upgrade clearmed)")
        raise RunStoreError(
            f"{path.parent} is a run of schema {version}, which this clearmed reads no more (it reads schema "
            f"{RUN_SCHEMA_VERSION}): read it with {reader}, or run it again"
        )
    try:
        return RunManifest.model_validate(data)
    except ValidationError as err:
        raise RunStoreError(f"{path}: unreadable manifest: {_first_error(err)}") from None


def _replace_durably(path: Path, content: bytes) -> None:
    """Write `content` as `path` in one rename, fsynced first: a kill leaves the old file or the new one, whole."""
    temporary = path.with_name(path.name + ".tmp")
    with temporary.open("wb") as handle:
        handle.write(content)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)


def _first_error(err: ValidationError) -> str:
    """One line for a validation error: where the first problem is, what it is, and how many more there are."""
    first = err.errors()[0]
    more = err.error_count() - 1
    return f"{'.'.join(map(str, first['loc']))}: {first['msg']}" + (f" (and {more} more)" if more else "")


def writable_line(record: EvalRecord) -> bytes:
    """The record's JSONL line, once it has passed the validation `read_records` will apply to it.

    Two round trips: through Python, which refuses what the record's own constraints refuse but a `model_copy`
    let in (a NaN probability), and through the JSON line itself, where a NaN becomes null."""
    try:
        EvalRecord.model_validate(record.model_dump())
        # Any registered secret left in the record (a provider echoing a key into a field no validator cleans) is
        # masked here, the one door into results.jsonl.
        text = redact_secrets(record.model_dump_json())
        EvalRecord.model_validate_json(text)
        return (text + "\n").encode("utf-8")
    except ValidationError as err:
        reason = _first_error(err)
    except (PydanticSerializationError, UnicodeError) as err:  # a lone surrogate: half a character, not text
        reason = f"it cannot be written as UTF-8 ({str(err).splitlines()[0][:160]})"
    raise UnwritableRecordError(f"{record.question_id}: its record would not load back ({reason})")


@dataclass(frozen=True)
class SkippedLine:
    """A line of results.jsonl that is not a valid record: torn (the last line, with no newline after it: a write
    cut short) or damaged."""

    path: Path
    number: int
    torn: bool
    reason: str
    raw: bytes = field(repr=False)

    def describe(self) -> str:
        kind = "torn last line (an interrupted write)" if self.torn else "damaged line"
        return f"{self.path}:{self.number}: {kind} skipped, its question counts as not done: {self.reason}"


@dataclass(frozen=True)
class ResultsScan:
    """Every valid record of a run folder, in file order, and the lines skipped."""

    records: list[EvalRecord]
    skipped: list[SkippedLine]


def _scan(path: Path) -> ResultsScan:
    """The one reading of results.jsonl: valid records kept, every other line skipped, torn or damaged alike."""
    numbered, skipped = _read_lines(path)
    return ResultsScan([record for _, record in numbered], skipped)


def _numbered_records(path: Path) -> list[tuple[int, EvalRecord]]:
    return _read_lines(path)[0]


def _read_lines(path: Path) -> tuple[list[tuple[int, EvalRecord]], list[SkippedLine]]:
    if not path.exists():
        return [], []
    lines = path.read_bytes().split(b"\n")
    last = len(lines) - 1  # the piece after the final newline: empty unless a write was cut short
    records: list[tuple[int, EvalRecord]] = []
    skipped: list[SkippedLine] = []
    for index, raw in enumerate(lines):
        if not raw.strip():
            continue
        try:
            records.append((index + 1, EvalRecord.model_validate(json.loads(raw))))
        except (ValueError, ValidationError) as err:  # JSON errors are ValueErrors too
            reason = _first_error(err) if isinstance(err, ValidationError) else str(err).splitlines()[0]
            skipped.append(SkippedLine(path=path, number=index + 1, torn=index == last, reason=reason, raw=raw))
    return records, skipped


def scan_results(directory: str | Path) -> ResultsScan:
    """Read results.jsonl: every valid record, and each line that is not one skipped with one warning. A run of
    another schema is refused first (`load_manifest`), so its records are never misread."""
    directory = Path(directory)
    if (directory / MANIFEST).is_file():
        load_manifest(directory / MANIFEST)
    scan = _scan(directory / RESULTS)
    for line in scan.skipped:
        warnings.warn(line.describe(), UnreadableResultWarning, stacklevel=2)
    return scan


def read_records(directory: str | Path) -> Iterator[EvalRecord]:
    """Every valid record of a run folder; a line that is not one is skipped with a warning (`scan_results`)."""
    yield from scan_results(directory).records


def read_set_aside_degraded(directory: str | Path) -> list[EvalRecord]:
    """The degraded records a resume set aside (their calls were paid for; their questions were redone)."""
    return [record for _, record in _numbered_records(Path(directory) / DEGRADED)]
