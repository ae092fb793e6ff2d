"""The consoles the command line writes to its user with: the one place that decides how output wraps.

On a terminal rich wraps long lines at the screen's width, as a reader expects. Anywhere else (a pipe, a Slurm log, a
CI job) there is no screen: rich would assume 80 columns and break a path mid-filename across two lines, which no
`grep` then finds. So a console made for a stream that is no terminal prints each line whole (rich's `soft_wrap`).
"""

from __future__ import annotations

import io
from typing import IO

from rich.console import Console


def user_console(
    *,
    stderr: bool = False,
    file: IO[str] | None = None,
    soft_wrap: bool | None = None,
    highlight: bool = True,
    quiet: bool = False,
) -> Console:
    """A console on stdout (or stderr, or `file`) that wraps on a terminal and never in a log; with `soft_wrap`, never
    (text meant to be copied whole, such as a Markdown table); `quiet`: it prints nothing (`--quiet`)."""
    console = Console(stderr=stderr, file=file, highlight=highlight, quiet=quiet)
    # Decided once, as it is made: whether the stream is a terminal does not change during a command.
    console.soft_wrap = soft_wrap or not console.is_terminal
    return console


class LogLines(io.TextIOBase):
    """A log's view of text written for a screen: what a live display draws in place is left out.

    A progress bar (tqdm's, which DSPy's optimizers draw) redraws its line by writing a carriage return and the
    new frame; in a file every frame stays, hundreds of them on one "line". Here the text of a write from its first
    carriage return on is such a frame and is dropped, as is the newline that closes a bar when nothing else is on
    its line; all other text reaches `target` as written."""

    def __init__(self, target: IO[str]) -> None:
        super().__init__()
        self.target = target
        self._line_open = False  # text of ours is on the target's current line
        self._after_frame = False  # the last write was a frame

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        kept = text
        if "\r" in text:
            kept = text[: text.index("\r")]
        elif self._after_frame and text.startswith("\n") and not self._line_open:
            kept = text[1:]  # the newline that closes a finished bar
        if kept:
            self.target.write(kept)
            self._line_open = not kept.endswith("\n")
        self._after_frame = "\r" in text
        return len(text)

    def flush(self) -> None:
        self.target.flush()
