"""Progress in batch logs. On a terminal a run draws rich's progress bar; anywhere else (a Slurm log, a CI job, a pipe)
the bar draws nothing until the run ends, so the run prints one plain line every `PROGRESS_EVERY` questions or
`PROGRESS_SECONDS` seconds instead, and one when it ends:

    clear on medqa: 50/200 (25%)  acc 48.0% (24/50)  $1.23  elapsed 0:10:02  ETA 0:30:06

The accuracy is over the clean scored answers so far (as the bar shows it), the dollars are the run's spend log
(resumed runs included), and the ETA is the questions left at this process's own pace (a resumed run's earlier
questions do not count towards the pace).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Protocol

from rich.console import Console

PROGRESS_EVERY = 25  # questions between two lines
PROGRESS_SECONDS = 60.0  # at most this long between two lines while questions finish


class Tally(Protocol):
    """What a line reports of the run so far (the runner's running counts)."""

    correct: int
    scored: int

    def spent_so_far(self) -> float: ...


def wants_lines(console: Console) -> bool:
    """Whether the console is a log rather than a screen (a notebook draws the bar itself)."""
    return not console.is_terminal and not console.is_jupyter


def _clock(seconds: float) -> str:
    return str(timedelta(seconds=round(seconds)))


@dataclass
class ProgressLines:
    """Call `tick` as each question finishes and `end` when the run stops; lines go to `console`."""

    console: Console
    label: str
    total: int
    done: int  # questions finished, those of earlier processes included
    every: int = PROGRESS_EVERY
    seconds: float = PROGRESS_SECONDS
    clock: Callable[[], float] = time.monotonic
    started_at: float = field(init=False)
    last_at: float = field(init=False)
    finished_here: int = 0
    printed_at: int = field(init=False)  # `done` when the last line was printed

    def __post_init__(self) -> None:
        self.started_at = self.last_at = self.clock()
        self.printed_at = self.done

    def tick(self, tally: Tally) -> None:
        self.done += 1
        self.finished_here += 1
        now = self.clock()
        if self.done - self.printed_at >= self.every or now - self.last_at >= self.seconds or self.done >= self.total:
            self._print(tally, now)

    def end(self, tally: Tally) -> None:
        """The last line, unless the last question's line said it all already."""
        if self.printed_at != self.done:
            self._print(tally, self.clock())

    def line(self, tally: Tally, now: float) -> str:
        share = f"{self.done / self.total:.0%}" if self.total else "-"
        accuracy = f"{tally.correct / tally.scored:.1%}" if tally.scored else "-"
        elapsed = now - self.started_at
        left = max(self.total - self.done, 0)
        eta = _clock(elapsed / self.finished_here * left) if self.finished_here else "-"
        return (
            f"{self.label}: {self.done}/{self.total} ({share})  acc {accuracy} ({tally.correct}/{tally.scored})  "
            f"${tally.spent_so_far():.2f}  elapsed {_clock(elapsed)}  ETA {eta}"
        )

    def _print(self, tally: Tally, now: float) -> None:
        self.console.print(self.line(tally, now), markup=False, highlight=False, soft_wrap=True)
        self.printed_at, self.last_at = self.done, now
