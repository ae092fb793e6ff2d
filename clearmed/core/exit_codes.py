"""The exit codes of `clearmed`, each once: the commands return them, `clearmed --help` lists them, and the README's
table is checked against this one (tests/cli/test_exit_codes.py). A batch scheduler (`sbatch --dependency=afterok`)
or CI reads success only from 0, so a run whose folder still holds work for a rerun never ends with it."""

from __future__ import annotations

from enum import IntEnum
from typing import Final

__all__ = ["EXIT_CODES_HELP", "ExitCode"]


class ExitCode(IntEnum):
    """What a `clearmed` command's exit status means; `meaning` is the line `--help` and the README give it."""

    DONE = 0
    FAILED = 1
    USAGE = 2
    BUDGET = 3
    UNFINISHED = 4
    INTERRUPTED = 130

    @property
    def meaning(self) -> str:
        return _MEANINGS[self]


_MEANINGS: dict[ExitCode, str] = {
    ExitCode.DONE: "done: every question of the run (of every cell of a suite) recorded, none degraded",
    ExitCode.FAILED: "an unexpected error (rerun with --debug for the traceback); `clearmed ask`: no answer",
    ExitCode.USAGE: "bad input, or a fatal service error (a rejected key, an exhausted balance, a missing model); "
    "the same command resumes once it is mended",
    ExitCode.BUDGET: "the run's budget (--max-cost, run.max_cost) was reached; the folder is summarized",
    ExitCode.UNFINISHED: "the run (or a suite cell) ended with degraded or unrecorded questions; the folder is "
    "summarized, and rerunning the same command resumes and redoes them",
    ExitCode.INTERRUPTED: "interrupted (Ctrl-C): the questions in flight finished; the same command resumes",
}


# The codes as `--help` shows them, one a line (built once: it is constant, and every command's parser shows it).
EXIT_CODES_HELP: Final = "exit codes:\n" + "\n".join(f"  {code.value:>3}  {code.meaning}" for code in ExitCode)
