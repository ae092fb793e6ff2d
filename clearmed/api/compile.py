"""`compile_prompts`: a program's prompts optimized with a DSPy optimizer into an artifact folder, the door of
`clearmed compile`. `CompileRequest` holds one field per option of the command; the train and validation questions
are drawn with the seed from the benchmark (none among `exclude_ids` or a repeat of one, MCQ with gold only)."""

from __future__ import annotations

import contextlib
import random
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError
from rich.console import Console

from clearmed.config import ClearmedConfig
from clearmed.core.console import LogLines, user_console
from clearmed.core.errors import UsageError

if TYPE_CHECKING:
    from clearmed.benchmarks import BenchmarkSet
    from clearmed.evaluation.progress import CountLines
    from clearmed.optimize.compiling import CompileReport, CompileSettings, Tick
    from clearmed.signatures.records import Question


class CompileRequest(BaseModel):
    """One field per `clearmed compile` option of the same name (`-c` is `config`, `--set` is `overrides`)."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    optimizer: str  # a DSPy optimizer (`optimize.compiling.OPTIMIZERS`)
    benchmark: str  # a benchmark name, or "demo"
    train: int  # train questions
    val: int  # validation questions
    out: str | Path  # the artifact folder
    program: str = "clear"
    source: str | Path | None = None  # a local file, or "shared"
    split: str | None = None
    skip_bad_rows: bool = False
    config: ClearmedConfig | str | Path | None = None
    overrides: list[str] = []
    seed: int = 0
    exclude_ids: str | Path | None = None  # a file of ids never to compile on (e.g. your test ids)
    stages: str | None = None  # predictors or modules to optimize, comma separated (None: all)
    max_demos: int = 2
    candidates: int = 4
    auto: Literal["light", "medium", "heavy", "none"] = "light"  # none: an explicit budget (trials, max_metric_calls)
    trials: int | None = None
    max_metric_calls: int | None = None
    bsize: int | None = None
    max_steps: int = 4
    threads: int | None = None  # default: [run] num_threads


@dataclass(frozen=True)
class Compiled:
    """What a compile wrote: the artifact folder, and the optimizer's report (scores before and after on val)."""

    out: Path
    report: CompileReport


@dataclass
class QuestionDraw:
    """The options that load the benchmark a compile draws from (`api.questions.QuestionOptions`)."""

    benchmark: str
    source: str | Path | None
    split: str | None
    limit: int | None
    seed: int
    skip_bad_rows: bool


def select_questions(request: CompileRequest) -> tuple[BenchmarkSet, list[Question], list[Question]]:
    """The benchmark set, and train + val questions drawn from it with the seed: none among `exclude_ids` or a
    repeat of one, MCQ with gold only."""
    from clearmed.api.questions import load_questions, read_id_file
    from clearmed.optimize.splits import without_repeats_of

    if request.train < 1 or request.val < 1:
        raise UsageError("--train and --val must both be at least 1")
    excluded = set(read_id_file(request.exclude_ids)) if request.exclude_ids else set()
    wanted = request.train + request.val
    # With exclusions the whole set is loaded, so the draw can skip them; otherwise only what is needed.
    bench = load_questions(
        QuestionDraw(
            benchmark=request.benchmark,
            source=request.source,
            split=request.split,
            limit=None if excluded else wanted,
            seed=request.seed,
            skip_bad_rows=request.skip_bad_rows,
        )
    )
    usable = [q for q in without_repeats_of(bench.questions, excluded) if q.is_mcq and q.gold_letters]
    if len(bench.questions) and not any(q.is_mcq for q in bench.questions):
        raise UsageError(f"{request.benchmark}: compile needs multiple-choice questions with gold letters")
    if len(usable) < wanted:
        raise UsageError(
            f"{request.benchmark}: {len(usable)} usable questions, but --train {request.train} + --val "
            f"{request.val} = {wanted} are needed"
        )
    rng = random.Random(request.seed)
    chosen = rng.sample(usable, wanted)
    return bench, chosen[: request.train], chosen[request.train :]


class PhaseLines:
    """`CompileProgress` for a batch log: eval's progress lines (`CountLines`), one run of them per phase."""

    def __init__(self, console: Console, label: str) -> None:
        self.console, self.label = console, label
        self.lines: CountLines | None = None

    def phase(self, label: str, total: int | None, unit: str) -> Tick:
        from clearmed.evaluation.progress import CountLines

        self.close()
        self.lines = CountLines(self.console, f"{self.label}, {label}", total, unit=unit)
        return self.lines.advance

    def close(self) -> None:
        """The last line of the phase running."""
        if self.lines is not None:
            self.lines.end()


@contextlib.contextmanager
def optimizer_output(log: bool) -> Iterator[None]:
    """Optimizers print their progress to stdout, and DSPy's draw tqdm bars: all goes to stderr (stdout is for the
    report), and in a log without the bars' frames (`LogLines`)."""
    stream = LogLines(sys.stderr) if log else sys.stderr
    with contextlib.redirect_stdout(stream), contextlib.redirect_stderr(stream):
        yield


def optimizer_names() -> list[str]:
    """The DSPy optimizers `compile` runs (`--optimizer`), in the order `optimize.compiling.OPTIMIZERS` lists them."""
    from clearmed.optimize.compiling import OPTIMIZERS

    return list(OPTIMIZERS)


def compile_prompts(request: CompileRequest | None = None, /, **fields: Any) -> Compiled:
    """Optimize the program's prompts and write the artifact: `compile_prompts(CompileRequest(...))` or its fields
    as keywords (`clearmed.compile(optimizer="bootstrap", benchmark="demo", train=4, val=2, out="art")`). Progress
    and the optimizers' own output go to stderr."""
    from clearmed.api import assemble
    from clearmed.api.config_choice import request_config
    from clearmed.evaluation.progress import wants_lines
    from clearmed.optimize.artifacts import new_manifest, prepare_out_dir, write_artifact
    from clearmed.optimize.compiling import CompileLMs, compile_program, resolve_stages
    from clearmed.optimize.splits import UsedIds, question_key_digest

    if request is None:
        request = CompileRequest(**fields)
    elif fields:
        raise UsageError("give a request or its fields as keywords, not both")
    config = request_config(request)
    _, train, val = select_questions(request)
    out = prepare_out_dir(request.out)
    lms = assemble.build_role_lms(config, roles=("main", "assessor", "teacher", "prompt_model"))
    program = assemble.build_program(
        request.program, config, role_lms={role: lm for role, lm in lms.items() if role in ("main", "assessor")}
    )
    stages = resolve_stages(program, request.stages)
    threads = request.threads or config.run.num_threads
    settings = compile_settings(request, stages if request.stages else [], threads=threads)
    compile_lms = CompileLMs(task=lms["main"], teacher=lms.get("teacher"), prompt=lms.get("prompt_model"))
    console = user_console(stderr=True)
    console.print(
        f"compiling {request.program} with {request.optimizer} on {len(train)} train / {len(val)} val questions "
        f"of {request.benchmark}; {len(stages)} predictors open to the optimizer",
        markup=False,
    )
    log = wants_lines(console)
    lines = PhaseLines(console, f"{request.program} with {request.optimizer}") if log else None
    with optimizer_output(log):
        compiled, report = compile_program(program, train, val, settings, compile_lms, progress=lines)
        if lines is not None:
            lines.close()
    manifest = new_manifest(
        "compile",
        request.program,
        config,
        benchmark=request.benchmark,
        optimizer=request.optimizer,
        stages=report.stages,
        has_program_state=True,
    )
    # The digests let eval refuse a twin of a seen question under another id too (`artifacts.refuse_seen_ids`).
    seen_keys = sorted({question_key_digest(q) for q in [*train, *val]})
    ids = UsedIds(train=[q.id for q in train], val=[q.id for q in val], seen_keys=seen_keys)
    thresholds = getattr(compiled, "thresholds", config.thresholds)
    write_artifact(
        out,
        manifest,
        thresholds=thresholds,
        ids=ids,
        config=config,
        program=compiled,
        reports={"scores.json": report.model_dump_json(indent=2)},
    )
    return Compiled(out=out, report=report)


def compile_settings(request: CompileRequest, stages: list[str], *, threads: int) -> CompileSettings:
    """The optimizer's settings from the request; a value it refuses is named by its flag."""
    from clearmed.optimize.compiling import CompileSettings

    try:
        return CompileSettings(
            optimizer=request.optimizer,  # type: ignore[arg-type]  # CompileSettings checks the name
            stages=stages,
            max_demos=request.max_demos,
            candidates=request.candidates,
            auto=None if request.auto == "none" else request.auto,
            trials=request.trials,
            max_metric_calls=request.max_metric_calls,
            bsize=request.bsize,
            max_steps=request.max_steps,
            threads=threads,
            seed=request.seed,
        )
    except ValidationError as err:
        problem = err.errors()[0]
        raise UsageError(f"--{str(problem['loc'][0]).replace('_', '-')}: {problem['msg']}") from None
