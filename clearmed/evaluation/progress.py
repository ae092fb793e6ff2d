"""Progress in batch logs. On a terminal a run draws rich's progress bar; anywhere else (a Slurm log, a CI job, a pipe)
the bar draws nothing until the run ends, so the run prints plain lines instead, in one form for every long command
(`clearmed eval`, `index build`, `index warm`, `compile`):

    clear on medqa: 50/200 (25%)  acc 48.0% (24/50)  $1.23  elapsed 0:10:02  ETA 0:30:06
    indexing openstax: 31000/60000 rows (52%)  elapsed 0:00:10  ETA 0:00:09
    compiling clear with mipro: 340 LM calls  elapsed 0:01:00

The rate suits the run's length (`next_gap`): a line is printed once the time since the last one (or the start) is
at least as long as the run had taken when that line was printed, but never less than `MIN_GAP` (10 s) nor more than
`PROGRESS_SECONDS` (60 s); and one at the end. Lines come at 10 s, 20 s, 40 s, 80 s, then every minute: a run of
a few seconds prints only its last line, one of 10 minutes 13, and a run of hours one a minute.

In eval's line the accuracy is over the clean scored answers so far (as the bar shows it), the dollars are the
run's spend log (resumed runs included), and the ETA is the work left at this process's own pace (a resumed run's
earlier questions do not count towards the pace).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Protocol

from rich.console import Console

MIN_GAP = 10.0  # never two lines closer than this, but the last
PROGRESS_SECONDS = 60.0  # at most this long between two lines while work finishes


def next_gap(elapsed: float) -> float:
    """Seconds from a line printed `elapsed` seconds into the run to the next: as long again, within
    [`MIN_GAP`, `PROGRESS_SECONDS`]."""
    return min(PROGRESS_SECONDS, max(MIN_GAP, elapsed))


def monotonic() -> float:
    """What the lines read the time with (a test swaps in a fake clock here, never the process's own)."""
    return time.monotonic()


class Tally(Protocol):
    """What eval's line reports of the run so far (the runner's running counts)."""

    correct: int
    scored: int

    def spent_so_far(self) -> float: ...


def wants_lines(console: Console) -> bool:
    """Whether the console is a log rather than a screen (a notebook draws the bar itself)."""
    return not console.is_terminal and not console.is_jupyter


def clock_text(seconds: float) -> str:
    """Seconds as a progress line shows a time: ``0:10:02``."""
    return str(timedelta(seconds=round(seconds)))


@dataclass
class CountLines:
    """Lines of `label: done/total unit (share)  details  elapsed  ETA` at the rate of `next_gap`, to `console`.

    Call `advance` (or `update` with a count) as work finishes, from any thread, and `end` when it stops. With no
    `total` the line is `label: done unit  details  elapsed`."""

    console: Console
    label: str
    total: int | None
    done: int = 0  # finished, that of earlier processes included
    unit: str = ""
    clock: Callable[[], float] = field(default_factory=lambda: monotonic)
    started_at: float = field(init=False)
    last_at: float = field(init=False)
    finished_here: int = field(init=False, default=0)
    printed_at: int = field(init=False)  # `done` when the last line was printed
    _lock: threading.Lock = field(init=False, repr=False, default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.started_at = self.last_at = self.clock()
        self.printed_at = self.done

    def advance(self, count: int = 1) -> None:
        with self._lock:
            self._moved(self.done + count)

    def update(self, done: int) -> None:
        """`done` finished in all (a reader that counts for itself)."""
        with self._lock:
            self._moved(done)

    def end(self) -> None:
        """The last line, unless the last line said it all already."""
        with self._lock:
            if self.printed_at != self.done:
                self._print(self.clock())

    def details(self) -> str:
        """What the line says between the count and the times ("" for nothing)."""
        return ""

    def line(self, now: float) -> str:
        unit = f" {self.unit}" if self.unit else ""
        elapsed = now - self.started_at
        if self.total is None:
            parts = [f"{self.label}: {self.done}{unit}", self.details(), f"elapsed {clock_text(elapsed)}"]
        else:
            share = f"{min(self.done / self.total, 1.0):.0%}" if self.total else "-"
            left = max(self.total - self.done, 0)
            eta = clock_text(elapsed / self.finished_here * left) if self.finished_here > 0 else "-"
            count = f"{self.label}: {self.done}/{self.total}{unit} ({share})"
            parts = [count, self.details(), f"elapsed {clock_text(elapsed)}", f"ETA {eta}"]
        return "  ".join(part for part in parts if part)

    def _moved(self, done: int) -> None:
        self.finished_here += done - self.done
        self.done = done
        now = self.clock()
        finished = self.total is not None and self.done >= self.total
        if (finished and self.printed_at != self.done) or now - self.last_at >= next_gap(
            self.last_at - self.started_at
        ):
            self._print(now)

    def _print(self, now: float) -> None:
        self.console.print(self.line(now), markup=False, highlight=False, soft_wrap=True)
        self.printed_at, self.last_at = self.done, now


@dataclass
class ProgressLines(CountLines):
    """eval's lines: call `tick` as each question finishes and `end` when the run stops."""

    total: int | None = None
    tally: Tally | None = field(init=False, default=None)

    def tick(self, tally: Tally) -> None:
        self.tally = tally
        self.advance()

    def end(self, tally: Tally | None = None) -> None:
        self.tally = tally or self.tally
        super().end()

    def details(self) -> str:
        if self.tally is None:
            return ""
        tally = self.tally
        accuracy = f"{tally.correct / tally.scored:.1%}" if tally.scored else "-"
        return f"acc {accuracy} ({tally.correct}/{tally.scored})  ${tally.spent_so_far():.2f}"
