"""A batch run's provider batches in its run folder: what was submitted, and what each line answered.

Two append-only files, written a line at a time as the spend log is (`spend_log`: a kill leaves at most a torn last
line, which reading skips):

- ``batches.jsonl``: one `BatchSending` line before a batch is sent (its intent, which goes into the batch's
  metadata, and its line keys), one `BatchSubmitted` line the moment the provider has accepted it, before anything
  waits on it (its id, provider, role and line keys), and one `BatchCollected` line once its results are in
  ``batch_results.jsonl``. A batch submitted and not collected is in flight: a rerun reattaches to it by its id and
  sends none of its lines again.
- ``batch_results.jsonl``: one `LineOutcome` per line of a collected batch: its reply (a 200 and its body), its failure
  (an error status or an error-file entry), or that it never ran (the batch expired or was cancelled first).

`BatchStore` is what `backbones.batch_calls.BatchPass` asks of a line (`backbones.batch_calls.LineAnswers`). Failures
count from this process on: a rerun gives a failed line its retries anew, as a resume redoes a degraded question.
"""

from __future__ import annotations

import os
import threading
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from clearmed.core.sanitize import redact_secrets

__all__ = [
    "BATCHES_FILE",
    "RESULTS_FILE",
    "BatchCollected",
    "BatchSending",
    "BatchStore",
    "BatchSubmitted",
    "LineOutcome",
]

BATCHES_FILE = "batches.jsonl"
RESULTS_FILE = "batch_results.jsonl"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class _BatchOfLines(BaseModel):
    """What a batch's record says of it wherever it is: where it goes, the keys of its lines, its worst-case price."""

    model_config = ConfigDict(extra="forbid")

    provider: str
    role: str
    keys: list[str]
    worst_usd: float | None = None
    run_pass: int = 0
    at: str = ""


class BatchSubmitted(_BatchOfLines):
    """A batch the provider accepted: its id, and the intent of the `BatchSending` it answers."""

    event: Literal["submitted"] = "submitted"
    batch_id: str
    intent: str | None = None


class BatchSending(_BatchOfLines):
    """A batch about to be sent, written before the provider is asked: its ``intent`` goes into the batch's metadata,
    so a rerun can find a batch the provider accepted just before a kill, whose id never reached the folder."""

    event: Literal["sending"] = "sending"
    intent: str


class BatchCollected(BaseModel):
    """A batch whose results are stored: its last status, its lines' counts, and what it cost at the batch price."""

    model_config = ConfigDict(extra="forbid")

    event: Literal["collected"] = "collected"
    batch_id: str
    status: str
    answered: int = 0
    failed: int = 0
    not_run: int = 0
    usd: float | None = None
    at: str = ""


class LineOutcome(BaseModel):
    """One line of a collected batch: answered (``status_code`` 200 and ``body``), failed (another status, or an error
    entry with ``error_code``) or not run (``not_run``: the batch expired or was cancelled before it)."""

    model_config = ConfigDict(extra="forbid")

    key: str
    batch_id: str
    status_code: int | None = None
    body: dict[str, Any] | None = None
    error_code: str | None = None
    error_message: str | None = None
    not_run: bool = False

    @property
    def answered(self) -> bool:
        return self.status_code == 200 and self.body is not None

    def as_reply(self) -> tuple[int, dict[str, Any]]:
        """The line as the HTTP reply its synchronous call would have had: its own status and body, or a 500 with an
        OpenAI-shaped error body naming the error entry."""
        if self.status_code is not None and self.body is not None:
            return self.status_code, self.body
        message = self.error_message or self.error_code or "the batch line failed"
        error = {"message": f"batch line failed: {message}", "type": "server_error", "param": None}
        return self.status_code or 500, {"error": {**error, "code": self.error_code}}


def _read(path: Path) -> list[bytes]:
    if not path.exists():
        return []
    return [line for line in path.read_bytes().split(b"\n") if line.strip()]


def _torn(path: Path) -> bool:
    """Whether the file ends inside a line (a kill mid-write)."""
    if not path.exists() or not path.stat().st_size:
        return False
    with path.open("rb") as handle:
        handle.seek(-1, os.SEEK_END)
        return handle.read(1) != b"\n"


class BatchStore:
    """A run folder's batches and line outcomes, read once and appended to as the run goes."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.submitted: dict[str, BatchSubmitted] = {}
        self.sending: dict[str, BatchSending] = {}  # by intent
        self.collected: dict[str, BatchCollected] = {}
        self._answers: dict[str, LineOutcome] = {}
        self._last_failure: dict[str, LineOutcome] = {}
        self._failures: Counter[str] = Counter()  # this process's failures per line key
        self._in_flight_keys: set[str] = set()
        self._lock = threading.Lock()
        for raw in _read(directory / BATCHES_FILE):
            try:
                if b'"submitted"' in raw:
                    event = BatchSubmitted.model_validate_json(raw)
                    self.submitted[event.batch_id] = event
                elif b'"sending"' in raw:
                    sending = BatchSending.model_validate_json(raw)
                    self.sending[sending.intent] = sending
                else:
                    collected = BatchCollected.model_validate_json(raw)
                    self.collected[collected.batch_id] = collected
            except (ValueError, ValidationError):  # a torn last line: its batch is found again, or sent again
                continue
        for raw in _read(directory / RESULTS_FILE):
            try:
                self._note(LineOutcome.model_validate_json(raw), count=False)
            except (ValueError, ValidationError):
                continue
        for batch_id in self.batches_in_flight():
            self._in_flight_keys.update(self.submitted[batch_id].keys)

    # ------------------------------------------------------------------------------------- what a pass asks

    def answer(self, key: str) -> tuple[int, dict[str, Any]] | None:
        outcome = self._answers.get(key)
        return outcome.as_reply() if outcome is not None else None

    def failures(self, key: str) -> tuple[int, tuple[int, dict[str, Any]] | None]:
        with self._lock:
            last = self._last_failure.get(key)
            return self._failures[key], last.as_reply() if last is not None else None

    def in_flight(self, key: str) -> bool:
        """Whether the line is in a batch submitted and not yet collected."""
        with self._lock:
            return key in self._in_flight_keys

    def batches_in_flight(self) -> list[str]:
        """The ids of the batches submitted and not yet collected, in the order they were submitted."""
        return [batch_id for batch_id in self.submitted if batch_id not in self.collected]

    # ------------------------------------------------------------------------------------- what the run records

    def unanswered_intents(self) -> list[BatchSending]:
        """Batches that were being sent when a run stopped, with no id recorded for them."""
        answered = {event.intent for event in self.submitted.values() if event.intent}
        return [sending for intent, sending in self.sending.items() if intent not in answered]

    def record_sending(self, event: BatchSending) -> None:
        """Record a batch about to be sent, before the provider is asked."""
        event = event.model_copy(update={"at": event.at or _now()})
        self._append(BATCHES_FILE, event.model_dump_json())
        with self._lock:
            self.sending[event.intent] = event

    def record_submitted(self, event: BatchSubmitted) -> None:
        """Record an accepted batch before anything waits on it."""
        event = event.model_copy(update={"at": event.at or _now()})
        self._append(BATCHES_FILE, event.model_dump_json())
        with self._lock:
            self.submitted[event.batch_id] = event
            self._in_flight_keys.update(event.keys)

    def record_collected(self, event: BatchCollected, outcomes: list[LineOutcome]) -> None:
        """Store a finished batch's lines, then mark it collected (a kill between the two collects it again)."""
        if outcomes:
            self._append(RESULTS_FILE, "\n".join(outcome.model_dump_json() for outcome in outcomes))
        for outcome in outcomes:
            self._note(outcome, count=True)
        event = event.model_copy(update={"at": event.at or _now()})
        self._append(BATCHES_FILE, event.model_dump_json())
        with self._lock:
            self.collected[event.batch_id] = event
            self._in_flight_keys.difference_update(self.submitted[event.batch_id].keys)

    def _note(self, outcome: LineOutcome, *, count: bool) -> None:
        with self._lock:
            if outcome.answered:
                self._answers[outcome.key] = outcome
            elif not outcome.not_run:
                self._last_failure[outcome.key] = outcome
                if count:
                    self._failures[outcome.key] += 1

    def _append(self, name: str, text: str) -> None:
        # A line's reply is stored as the provider sent it (redacting it could change what the question decides).
        line = ((text if name == RESULTS_FILE else redact_secrets(text)) + "\n").encode("utf-8", "replace")
        path = self.directory / name
        with self._lock:
            if _torn(path):
                line = b"\n" + line  # after a torn last line: start anew
            handle = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(handle, line)
            finally:
                os.close(handle)
