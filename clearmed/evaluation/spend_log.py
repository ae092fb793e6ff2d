"""The spend log: every paid call of a run appended to spend.jsonl the moment it completes.

A question's record is written when it finishes, so calls made by the questions in flight at a SIGKILL would be paid
and never counted; on resume they come back from the LM cache at $0. The log closes that gap: the pathways' usage rows
reach it as each stage completes (`programs.lm.run_context.USAGE_SINK`) and the graders' as each grade completes, so
the budget (`--max-cost`) counts every dollar billed, across kills and resumes: LM calls at the backbones' prices,
Tavily searches at `[run] tavily_usd_per_credit`, and grading. One line per paid call (cache hits cost nothing and are
not logged), appended in one write: a kill leaves at most a torn last line, which reading skips and the next append
starts after. The page cache keeps what was written when the process dies, so no fsync is needed for a kill.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from clearmed.core.sanitize import redact_secrets
from clearmed.evaluation.spend import Prices
from clearmed.programs.lm.context import USAGE_SINK
from clearmed.signatures.records import CallUsage

__all__ = ["SPEND_LOG", "SpendEntry", "SpendLog"]

SPEND_LOG = "spend.jsonl"


class SpendEntry(BaseModel):
    """One paid call: the question it was made for, its dollars (None: unpriced) and its usage row."""

    model_config = ConfigDict(extra="forbid")

    question_id: str
    usd: float | None
    row: CallUsage


class SpendLog:
    """A run folder's spend log, open for appending; `total_usd` is what every logged call cost."""

    def __init__(self, directory: Path, prices: Prices) -> None:
        self.path = directory / SPEND_LOG
        self.prices = prices
        self._lock = threading.Lock()
        self._total = 0.0
        self.questions: set[str] = set()
        self.new = not self.path.exists()  # a folder from before there was a log: `carry_over` its records
        torn = False
        if self.path.exists():
            raw = self.path.read_bytes()
            torn = bool(raw) and not raw.endswith(b"\n")
            for line in raw.split(b"\n"):
                if not line.strip():
                    continue
                try:
                    entry = SpendEntry.model_validate_json(line)
                except (ValueError, ValidationError):  # a torn last line (a kill mid-write): its call is lost
                    continue
                self._total += entry.usd or 0.0
                self.questions.add(entry.question_id)
        if torn:  # the next line must start on its own
            with self.path.open("ab") as handle:
                handle.write(b"\n")

    def total_usd(self) -> float:
        with self._lock:
            return self._total

    def carry_over(self, question_id: str, usd: float | None) -> None:
        """Log what a record written before this folder had a spend log cost (its record's own price)."""
        if usd:
            self.add(question_id, CallUsage(stage="before_spend_log", role="record", calls=0), usd=usd)

    def add(self, question_id: str, row: CallUsage, *, usd: float | None = None) -> None:
        usd = self.prices.row_usd(row) if usd is None else usd
        if not usd and not row.credits:  # a cache hit or a refusal: nothing was billed
            return
        text = redact_secrets(SpendEntry(question_id=question_id, usd=usd, row=row).model_dump_json())
        line = (text + "\n").encode("utf-8", "replace")
        with self._lock:
            handle = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(handle, line)
            finally:
                os.close(handle)
            self._total += usd or 0.0
            self.questions.add(question_id)

    @contextlib.contextmanager
    def question(self, question_id: str) -> Iterator[None]:
        """Log every usage row the block's stages add (pathway threads included) against `question_id`."""
        token = USAGE_SINK.set(lambda row: self.add(question_id, row))
        try:
            yield
        finally:
            USAGE_SINK.reset(token)
