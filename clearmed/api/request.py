"""`EvalRequest`: one run of a program over questions, as `clearmed eval` and `clearmed.evaluate` both take it.

Each field is an option of `clearmed eval`, named as its argparse destination (`--set` is `overrides`, `-c` is
`config`), so the command line builds the request from its parsed arguments with no table between them, and a new
option without a field here is caught by tests/test_one_door.py. The few fields after them are the Python door's
own: questions given as a list, the folder name a list records, and whether the progress bar is drawn.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from clearmed.config import ClearmedConfig
from clearmed.core.errors import UsageError
from clearmed.signatures.records import Question


class EvalRequest(BaseModel):
    """Everything one run of `clearmed eval` is made of; unset fields mean what the command's defaults mean."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    # Which questions: a benchmark name (`clearmed benchmarks`, "demo", or "questions": your own file as the source)
    # and how to read it.
    program: Any = "clear"  # a program name, or a dspy.Module you built (checked when the run starts)
    benchmark: str = "demo"
    source: str | Path | None = None  # a local file, or "shared" (the shared data folder's copy)
    split: str | None = None
    revision: str | None = None  # a hub branch, tag or commit
    config: ClearmedConfig | str | Path | None = None  # a config, a packaged config name or a TOML path
    overrides: list[str] = []  # SECTION.KEY=VALUE, as `--set` gives them
    limit: int | None = None
    seed: int = 0
    ids: str | Path | None = None  # a file of question ids, run in its order
    skip_bad_rows: bool = False
    # How the run is made.
    threads: int | None = None  # default: [run] num_threads
    run_dir: str | Path | None = None  # default: runs/<config>/<benchmark>/<program>-n<N>-s<seed>[-<overrides>]
    program_artifact: str | Path | None = None
    allow_train_overlap: bool = False
    keep_degraded: bool = False
    max_cost: float | None = None  # default: [run] max_cost
    batch: bool = False  # through the providers' batch APIs, in passes (`batch.run`)
    estimate: bool = False
    pilot: int | None = None
    pathway: list[str] = []  # NAME=SOURCE: a recorded (or absent) pathway
    shard: str | None = None  # K/N
    stop_after: int | None = None  # stop after N questions (tests, and the pilot)
    quiet: bool = False  # one line a run (no progress, no tables); notes, warnings and errors are still said
    # The Python door's own.
    questions: list[Question] | None = None  # given in place of a benchmark's; `benchmark` names them
    show_progress: bool = True


# The Python door's own fields, which no `clearmed eval` option sets.
_PYTHON_ONLY = ("questions", "show_progress")
# The options a suite's evals are printed with come first, in the order its commands have always shown them.
_FIRST = ("program", "benchmark", "config", "source", "split", "revision", "ids", "limit", "seed", "threads")
_FLAGS = {"config": "-c", "overrides": "--set"}  # the rest: --the-field-name


def program_names() -> list[str]:
    """The programs a run can name (`--program` of `clearmed eval` and `compile`), sorted; read from the catalog,
    which loads no DSPy (a command's --help stays light)."""
    from clearmed.programs.catalog import PROGRAMS

    return sorted(PROGRAMS)


def request_argv(request: EvalRequest) -> list[str]:
    """`request` as the `clearmed eval` command line that parses into an equal request (`--print-commands`); a
    request of a built module or a list of questions has none (one line)."""
    if not isinstance(request.program, str) or request.questions is not None:
        raise UsageError("a request of a built module or a list of questions has no command line")
    if isinstance(request.config, ClearmedConfig):
        raise UsageError("a request of a loaded config has no command line: give its name or TOML path")
    names = [*_FIRST, *(name for name in EvalRequest.model_fields if name not in (*_FIRST, *_PYTHON_ONLY))]
    argv = ["eval"]
    for name in names:
        value, flag = getattr(request, name), _FLAGS.get(name, "--" + name.replace("_", "-"))
        if value is True:
            argv.append(flag)
        elif isinstance(value, list):
            argv += [item for each in value for item in (flag, str(each))]
        elif value is not None and value is not False:
            argv += [flag, str(value)]
    return argv
