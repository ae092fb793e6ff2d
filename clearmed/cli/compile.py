"""`clearmed compile`: optimize the program's prompts with a DSPy optimizer into an artifact folder."""

from __future__ import annotations

import argparse
import contextlib
import random
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

from pydantic import ValidationError
from rich.console import Console

from clearmed.cli.main import add_config_arguments, config_from_args
from clearmed.core.console import LogLines, user_console
from clearmed.core.errors import UsageError
from clearmed.evaluation.progress import CountLines, wants_lines

if TYPE_CHECKING:
    from clearmed.benchmarks import BenchmarkSet
    from clearmed.optimize.compiling import CompileReport, CompileSettings, SplitScore, Tick
    from clearmed.signatures.records import Question


def _select(args: argparse.Namespace) -> tuple[BenchmarkSet, list[Question], list[Question]]:
    """The benchmark set, and train + val questions drawn from it with the seed: none among --exclude-ids or a
    repeat of one, MCQ with gold only."""
    from clearmed.cli.evaluate import _load_questions
    from clearmed.optimize.splits import read_id_file, without_repeats_of

    if args.train < 1 or args.val < 1:
        raise UsageError("--train and --val must both be at least 1")
    excluded = set(read_id_file(args.exclude_ids)) if args.exclude_ids else set()
    wanted = args.train + args.val
    # With exclusions the whole set is loaded, so the draw can skip them; otherwise only what is needed.
    loader = argparse.Namespace(
        benchmark=args.benchmark,
        source=args.source,
        split=args.split,
        limit=None if excluded else wanted,
        seed=args.seed,
        skip_bad_rows=args.skip_bad_rows,
        ids=None,
    )
    bench = _load_questions(loader)
    usable = [q for q in without_repeats_of(bench.questions, excluded) if q.is_mcq and q.gold_letters]
    if len(bench.questions) and not any(q.is_mcq for q in bench.questions):
        raise UsageError(f"{args.benchmark}: compile needs multiple-choice questions with gold letters")
    if len(usable) < wanted:
        raise UsageError(
            f"{args.benchmark}: {len(usable)} usable questions, but --train {args.train} + --val {args.val} "
            f"= {wanted} are needed"
        )
    rng = random.Random(args.seed)
    chosen = rng.sample(usable, wanted)
    return bench, chosen[: args.train], chosen[args.train :]


class PhaseLines:
    """`CompileProgress` for a batch log: eval's progress lines (`CountLines`), one run of them per phase."""

    def __init__(self, console: Console, label: str) -> None:
        self.console, self.label = console, label
        self.lines: CountLines | None = None

    def phase(self, label: str, total: int | None, unit: str) -> Tick:
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


def run_compile(args: argparse.Namespace) -> int:
    from clearmed.api import assemble
    from clearmed.optimize.artifacts import new_manifest, prepare_out_dir, write_artifact
    from clearmed.optimize.compiling import CompileLMs, compile_program, resolve_stages
    from clearmed.optimize.splits import UsedIds, question_key_digest

    config = config_from_args(args)
    _, train, val = _select(args)
    out = prepare_out_dir(args.out)
    lms = assemble.build_role_lms(config, roles=("main", "assessor", "teacher", "prompt_model"))
    program = assemble.build_program(
        args.program, config, role_lms={role: lm for role, lm in lms.items() if role in ("main", "assessor")}
    )
    stages = resolve_stages(program, args.stages)
    settings = _compile_settings(args, stages if args.stages else [], threads=args.threads or config.run.num_threads)
    compile_lms = CompileLMs(task=lms["main"], teacher=lms.get("teacher"), prompt=lms.get("prompt_model"))
    console = user_console(stderr=True)
    console.print(
        f"compiling {args.program} with {args.optimizer} on {len(train)} train / {len(val)} val questions "
        f"of {args.benchmark}; {len(stages)} predictors open to the optimizer",
        markup=False,
    )
    log = wants_lines(console)
    lines = PhaseLines(console, f"{args.program} with {args.optimizer}") if log else None
    with optimizer_output(log):
        compiled, report = compile_program(program, train, val, settings, compile_lms, progress=lines)
        if lines is not None:
            lines.close()
    manifest = new_manifest(
        "compile",
        args.program,
        config,
        benchmark=args.benchmark,
        optimizer=args.optimizer,
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
    user_console().print(_report(report))
    console.print(f"artifact: {out}  (use it with --program-artifact {out})", markup=False, highlight=False)
    return 0


def _compile_settings(args: argparse.Namespace, stages: list[str], *, threads: int) -> CompileSettings:
    """The optimizer's settings from the flags; a value it refuses is named by its flag."""
    from clearmed.optimize.compiling import CompileSettings

    try:
        return CompileSettings(
            optimizer=args.optimizer,
            stages=stages,
            max_demos=args.max_demos,
            candidates=args.candidates,
            auto=None if args.auto == "none" else args.auto,
            trials=args.trials,
            max_metric_calls=args.max_metric_calls,
            bsize=args.bsize,
            max_steps=args.max_steps,
            threads=threads,
            seed=args.seed,
        )
    except ValidationError as err:
        problem = err.errors()[0]
        raise UsageError(f"--{str(problem['loc'][0]).replace('_', '-')}: {problem['msg']}") from None


def _report(report: CompileReport) -> str:
    def row(name: str, score: SplitScore) -> str:
        acc = score.accuracy
        interval = f"[{acc.wilson.low:.3f}, {acc.wilson.high:.3f}]" if acc.wilson else "-"
        return f"| {name} | {acc.n} | {acc.accuracy:.3f} | {interval} | {score.mean_lm_calls:.2f} |"

    return "\n".join(
        [
            f"{report.settings.optimizer}: {report.compile_lm_calls} LM calls, {report.compile_seconds:.1f} s",
            "",
            "| program on val ids | n | accuracy | 95% Wilson | LM calls/q |",
            "|---|---|---|---|---|",
            row("before", report.val_before),
            row("after", report.val_after),
            "",
            "val ids were seen by the optimizer: evaluate on other ids for a test score",
        ]
    )


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from clearmed.optimize.compiling import OPTIMIZERS
    from clearmed.programs.catalog import PROGRAMS

    compile_ = commands.add_parser("compile")
    compile_.add_argument("--program", default="clear", choices=sorted(PROGRAMS), help="program to compile")
    compile_.add_argument("--optimizer", required=True, choices=list(OPTIMIZERS), help="DSPy optimizer")
    compile_.add_argument("--benchmark", required=True, help="benchmark name (see `clearmed benchmarks`), or 'demo'")
    compile_.add_argument("--source", help="local file in the upstream schema, or 'shared' (default: the hub copy)")
    compile_.add_argument("--split", help="hub split (or label for a local file)")
    compile_.add_argument(
        "--skip-bad-rows", action="store_true", help="skip and count malformed benchmark rows instead of stopping"
    )
    add_config_arguments(compile_)
    compile_.add_argument("--train", type=int, required=True, help="train questions")
    compile_.add_argument("--val", type=int, required=True, help="validation questions")
    compile_.add_argument("--seed", type=int, default=0)
    compile_.add_argument("--exclude-ids", help="file of ids never to compile on (e.g. your test ids)")
    compile_.add_argument("--stages", help="predictors or modules to optimize, comma separated (default: all)")
    compile_.add_argument("--max-demos", type=int, default=2, help="bootstrapped demos per predictor (default 2)")
    compile_.add_argument("--candidates", type=int, default=4, help="candidate programs or instructions")
    compile_.add_argument(
        "--auto", choices=["light", "medium", "heavy", "none"], default="light", help="MIPROv2/GEPA budget preset"
    )
    compile_.add_argument("--trials", type=int, help="MIPROv2 trials (with --auto none)")
    compile_.add_argument("--max-metric-calls", type=int, help="GEPA budget (with --auto none)")
    compile_.add_argument("--bsize", type=int, help="SIMBA mini-batch size")
    compile_.add_argument("--max-steps", type=int, default=4, help="SIMBA steps")
    compile_.add_argument("--threads", type=int, help="parallel program calls (default: run.num_threads)")
    compile_.add_argument("--out", required=True, help="artifact folder")
    compile_.set_defaults(func=run_compile)
