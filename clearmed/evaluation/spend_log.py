"""The spend log: every paid call of a run appended to spend.jsonl the moment it completes.

A question's record is written when it finishes, so calls made by the questions in flight at a SIGKILL would be paid
and never counted; on resume they come back from the LM cache at $0. The log closes that gap: the pathways' usage rows
reach it as each stage completes (`programs.lm.context.USAGE_SINK`) and the graders' as each grade completes, so
the budget (`--max-cost`) counts every dollar billed, across kills and resumes: LM calls at the backbones' prices,
Tavily searches at `[run] tavily_usd_per_credit`, and grading. It is also the one source of the summary's dollars,
credits and retries (`report.run_folder.finish_run_folder`), so attempts a kill cut short or a resume redid count there too. One
line per paid, retried or unpriced call (cache hits cost nothing and are not logged), appended in one write: a kill leaves at most a torn last line, which reading skips and the next append
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

__all__ = ["SPEND_LOG", "SpendEntry", "SpendLog", "read_spend_log"]

SPEND_LOG = "spend.jsonl"


class SpendEntry(BaseModel):
    """One paid call: the question it was made for, its dollars (None: unpriced) and its usage row; or one provider
    batch of a batch run (`batch_id`; its row sums the batch's answered lines, at the batch price)."""

    model_config = ConfigDict(extra="forbid")

    question_id: str
    usd: float | None
    row: CallUsage
    batch_id: str | None = None


def read_spend_log(directory: str | Path) -> list[SpendEntry]:
    """Every call a run folder's spend log holds (none without one); a line that is not an entry (the torn last line
    of a kill mid-write) is skipped: its call is lost."""
    path = Path(directory) / SPEND_LOG
    if not path.exists():
        return []
    entries = []
    for line in path.read_bytes().split(b"\n"):
        if line.strip():
            try:
                entries.append(SpendEntry.model_validate_json(line))
            except (ValueError, ValidationError):
                continue
    return entries


def paid_calls(directory: str | Path) -> list[SpendEntry] | None:
    """A run folder's spend log as `summarize`'s ``paid`` (the one source of its dollars and retries), None for a
    folder that has none (written before the log was kept, or another system's run): its records are priced
    instead."""
    return read_spend_log(directory) if (Path(directory) / SPEND_LOG).is_file() else None


class SpendLog:
    """A run folder's spend log, open for appending; `total_usd` is what every logged call cost."""

    def __init__(self, directory: Path, prices: Prices) -> None:
        self.path = directory / SPEND_LOG
        self.prices = prices
        self._lock = threading.Lock()
        self._total = 0.0
        self.questions: set[str] = set()
        self.batch_ids: set[str] = set()  # a batch run's batches already logged
        self.new = not self.path.exists()  # a folder from before there was a log: `carry_over` its records
        for entry in read_spend_log(directory):
            self._total += entry.usd or 0.0
            self.questions.add(entry.question_id)
            if entry.batch_id is not None:
                self.batch_ids.add(entry.batch_id)
        if self.path.exists() and not self.path.read_bytes().endswith(b"\n"):  # torn: the next line starts anew
            with self.path.open("ab") as handle:
                handle.write(b"\n")

    def total_usd(self) -> float:
        with self._lock:
            return self._total

    def carry_over(self, question_id: str, usd: float | None, retries: int = 0) -> None:
        """Log what a record written before this folder had a spend log cost (its record's own price, 0 when unknown)
        and how often its calls were retried."""
        if usd or retries:
            row = CallUsage(stage="before_spend_log", role="record", calls=0, retries=retries)
            self.add(question_id, row, usd=usd or 0.0)

    def add(self, question_id: str, row: CallUsage, *, usd: float | None = None, batch_id: str | None = None) -> None:
        """Log one call: billed, retried or of unknown price (a cache hit or a refusal that was not retried costs
        nothing and is not logged). A batch run's calls of a batched role are not: their batch is logged once it
        answers (`batch_id`), as the provider bills it."""
        if batch_id is None and row.role in self.prices.batched_roles:
            return
        usd = self.prices.row_usd(row) if usd is None else usd
        if usd == 0 and not row.credits and not row.retries and batch_id is None:
            return
        entry = SpendEntry(question_id=question_id, usd=usd, row=row, batch_id=batch_id)
        text = redact_secrets(entry.model_dump_json())
        line = (text + "\n").encode("utf-8", "replace")
        with self._lock:
            handle = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(handle, line)
            finally:
                os.close(handle)
            self._total += usd or 0.0
            self.questions.add(question_id)
            if batch_id is not None:
                self.batch_ids.add(batch_id)

    @contextlib.contextmanager
    def question(self, question_id: str) -> Iterator[None]:
        """Log every usage row the block's stages add (pathway threads included) against `question_id`."""
        token = USAGE_SINK.set(lambda row: self.add(question_id, row))
        try:
            yield
        finally:
            USAGE_SINK.reset(token)
