"""`clearmed eval` and `clearmed compare`: thin wrappers over `clearmed.evaluation`."""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from clearmed.cli.program_setup import (
    add_artifact_argument,
    add_config_arguments,
    artifact_from_args,
    built_program,
    config_from_args,
)
from clearmed.core.errors import UsageError

if TYPE_CHECKING:
    from clearmed.benchmarks import BenchmarkSet, OnError
    from clearmed.config import ClearmedConfig
    from clearmed.evaluation import EvalSpec, RunSummary
    from clearmed.evaluation.recorded import RecordedPathway
    from clearmed.evaluation.shard import RunShard
    from clearmed.optimize.artifacts import ProgramArtifact
    from clearmed.signatures.records import Question


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "run"


def default_run_dir(
    runs_dir: Path,
    config_name: str,
    benchmark: str,
    program: str,
    limit: int | None,
    seed: int,
    shard: tuple[int, int] | None = None,
) -> Path:
    """The same command always names the same folder, so rerunning it resumes; shard K of N is a sibling folder of
    the run's own (where `clearmed merge` puts the joined run)."""
    size = f"n{limit}" if limit else "all"
    part = f"-shard{shard[0]}of{shard[1]}" if shard else ""
    return runs_dir / _slug(config_name) / _slug(benchmark) / f"{_slug(program)}-{size}-s{seed}{part}"


def shared_source(benchmark: str) -> Path:
    """`--source shared`: the benchmark's file in the shared development data folder."""
    from clearmed.benchmarks import benchmark_info
    from clearmed.retrieval.corpus import shared_data_root

    info = benchmark_info(benchmark)
    if not info.shared_file:
        raise UsageError(f"{benchmark} has no file in the shared data; pass --source <file> or use the hub")
    return shared_data_root() / "benchmarks" / info.shared_file


def _load_questions(args: argparse.Namespace) -> BenchmarkSet:
    from clearmed.benchmarks import BenchmarkSet, load_benchmark, sample

    revision = getattr(args, "revision", None)  # commands without --revision hand their own namespace
    wanted = _wanted_ids(args)
    if args.benchmark == "demo":
        if revision is not None:
            raise UsageError("--revision picks a Hugging Face hub revision; the demo bundle has none")
        from clearmed.demo import demo_questions

        chosen = list(demo_questions()) if wanted else sample(list(demo_questions()), limit=args.limit, seed=args.seed)
        bench = BenchmarkSet(name="demo", source="built-in demo bundle", split="demo", questions=chosen)
        return _only(bench, wanted, args.benchmark) if wanted else bench
    source = shared_source(args.benchmark) if args.source == "shared" else args.source
    on_error: OnError = "skip" if args.skip_bad_rows else "raise"
    if wanted:  # exactly these questions, in the file's order (a held-out test split, say)
        bench = load_benchmark(args.benchmark, source=source, split=args.split, on_error=on_error, revision=revision)
        return _only(bench, wanted, args.benchmark)
    return load_benchmark(
        args.benchmark,
        source=source,
        split=args.split,
        limit=args.limit,
        seed=args.seed,
        on_error=on_error,
        revision=revision,
    )


def _wanted_ids(args: argparse.Namespace) -> list[str]:
    """`--ids FILE`: its ids, in order (none without it). An id listed twice is refused in one line naming it: the
    run would answer one question twice, and a summary scores each question once."""
    if not getattr(args, "ids", None):
        return []
    from clearmed.optimize.splits import read_id_file

    if args.limit:
        raise UsageError("give --ids or --limit, not both")
    wanted = read_id_file(args.ids)
    seen: set[str] = set()
    for qid in wanted:
        if qid in seen:
            raise UsageError(f"--ids {args.ids}: the id {qid!r} is listed twice; list each question once")
        seen.add(qid)
    return wanted


def _only(bench: BenchmarkSet, wanted: Sequence[str], benchmark: str) -> BenchmarkSet:
    """The benchmark's questions with these ids, in this order; an id it lacks is one line."""
    by_id = {q.id: q for q in bench.questions}
    missing = [qid for qid in wanted if qid not in by_id]
    if missing:
        raise UsageError(f"--ids: {len(missing)} ids are not in {benchmark} (first: {missing[0]})")
    return bench.model_copy(update={"questions": [by_id[qid] for qid in wanted]})


def _recorded_pathways(given: list[str], questions: Sequence[Question]) -> list[RecordedPathway]:
    """`--pathway NAME=SOURCE` as recorded (or absent) pathways; a bad form or an unreadable source is one line."""
    from clearmed.evaluation.recorded import RecordedPathwayError, absent_pathway, read_recorded_pathway

    chosen: dict[str, RecordedPathway] = {}
    for item in given:
        name, sep, source = item.partition("=")
        if not sep or name not in ("parametric", "local", "dynamic") or not source:
            raise UsageError(f"--pathway {item!r}: give NAME=SOURCE with NAME parametric, local or dynamic")
        if name in chosen:
            raise UsageError(f"--pathway {name} is given twice")
        try:
            chosen[name] = (
                absent_pathway(name, questions)  # type: ignore[arg-type]
                if source == "absent"
                else read_recorded_pathway(Path(source), name, questions)  # type: ignore[arg-type]
            )
        except RecordedPathwayError as err:
            raise UsageError(f"--pathway {name}: {err}") from None
    return list(chosen.values())


def run_eval(args: argparse.Namespace) -> int:
    """Exit codes: 0 done, 2 bad input or a fatal service error (a rejected key, an exhausted balance, a missing
    model: the run stops after its questions in flight and resumes with the same command), 3 the budget reached."""
    from clearmed.core.errors import FatalServiceError
    from clearmed.evaluation import run_evaluation
    from clearmed.evaluation.runner import BudgetReached

    config = config_from_args(args)
    bench = _load_questions(args)
    if not bench.questions:
        raise UsageError(f"{args.benchmark}: no questions to evaluate")
    spec, config, artifact, recorded = _eval_spec(args, config, bench)
    console = Console(stderr=True)
    if bench.n_skipped:
        console.print(f"[yellow]{bench.n_skipped} malformed rows skipped[/]", highlight=False)
        for issue in bench.skipped[:3]:
            console.print(f"  {issue.location}: {issue.reason}", markup=False, highlight=False)
    threads = args.threads or config.run.num_threads
    max_cost = args.max_cost if args.max_cost is not None else config.run.max_cost
    if max_cost is not None and max_cost <= 0:
        raise UsageError(f"--max-cost must be a positive number of US dollars, not {max_cost:g}")
    if args.pilot is not None and (not args.estimate or args.pilot < 1):
        raise UsageError("--pilot N (N >= 1) runs the first N questions for --estimate; give both")
    if args.estimate and not args.pilot:  # from stored runs: nothing is built, nothing is spent
        Console(soft_wrap=True).print(_estimate_text(spec, config, threads, pilot=False), markup=False)
        return 0
    from clearmed.evaluation.scoring import scorer_for

    program = built_program(args.program, config, artifact, pathways={r.pathway: r.module() for r in recorded})
    try:
        run_evaluation(
            spec,
            config,
            program,
            scorer=scorer_for(config),
            num_threads=threads,
            console=console,
            stop_after=args.pilot if args.estimate else args.stop_after,
            keep_degraded=args.keep_degraded,
            max_cost=max_cost,
        )
    except FatalServiceError as err:  # one line, no summary: the folder holds what finished, and resumes
        raise UsageError(f"{err}; the run stopped (resume with the same command once that is mended)") from None
    except BudgetReached as err:
        _write_summary(spec, config, console)
        console.print(f"clearmed: {err}", markup=False, highlight=False, soft_wrap=True)
        return 3
    if args.estimate:
        Console(soft_wrap=True).print(_estimate_text(spec, config, threads, pilot=True), markup=False)
        return 0
    _print_summary(_write_summary(spec, config, console))
    console.print(f"run folder: {spec.run_dir}")
    return 0


def _eval_spec(
    args: argparse.Namespace, config: ClearmedConfig, bench: BenchmarkSet
) -> tuple[EvalSpec, ClearmedConfig, ProgramArtifact | None, list[RecordedPathway]]:
    """The run to make: its spec (named by the program, its artifact and its recorded pathways), the config carrying
    the artifact's thresholds, the artifact and the recorded pathways."""
    from clearmed.evaluation import EvalSpec

    artifact, config = artifact_from_args(args, config)
    questions, shard = _sharded(args.shard, bench.questions)
    if artifact is not None:
        from clearmed.optimize.artifacts import refuse_seen_ids

        refuse_seen_ids([q.id for q in questions], artifact, allow=args.allow_train_overlap)
    label = args.program if artifact is None else f"{args.program}+{artifact.path.resolve().name}"
    recorded = _recorded_pathways(args.pathway, questions)
    label += "".join(f"+{r.pathway}={r.label}" for r in recorded)
    run_dir = (
        Path(args.run_dir)
        if args.run_dir
        else default_run_dir(
            config.run.runs_dir,
            Path(config.source).stem,
            args.benchmark,
            label,
            args.limit,
            args.seed,
            shard=(shard.index, shard.count) if shard else None,
        )
    )
    spec = EvalSpec(
        program=args.program,
        benchmark=args.benchmark,
        source=bench.source,
        questions=questions,
        run_dir=run_dir,
        limit=args.limit,
        seed=args.seed,
        artifact=str(artifact.path.resolve()) if artifact is not None else None,
        recorded_pathways={r.pathway: r.source for r in recorded},
        shard=shard,
        dataset_revision=bench.revision,
    )
    return spec, config, artifact, recorded


def _sharded(given: str | None, questions: Sequence[Question]) -> tuple[list[Question], RunShard | None]:
    """`--shard K/N`: shard K of the run's questions (clearmed.evaluation.shard), else all of them."""
    if given is None:
        return list(questions), None
    from clearmed.evaluation.shard import parse_shard, take_shard

    index, count = parse_shard(given)
    return take_shard(questions, [q.id for q in questions], index, count)


def _print_summary(summary: RunSummary) -> None:
    from clearmed.report.markdown import comparison_table, details_markdown

    Console(soft_wrap=True).print(
        comparison_table([summary]) + details_markdown([summary]), markup=False, highlight=False
    )


def _write_summary(spec: EvalSpec, config: ClearmedConfig, console: Console) -> RunSummary:
    """summary.json, summary.md, leakage.json, plots and the HTML report of what the run folder holds."""
    from clearmed.evaluation.spend import Prices
    from clearmed.report.run_folder import finish_run_folder

    return finish_run_folder(spec.run_dir, Prices.of(config), console)


def _estimate_text(spec: EvalSpec, config: ClearmedConfig, threads: int, *, pilot: bool) -> str:
    """The expected calls, tokens, dollars, credits and wall time of the questions the run has left."""
    from clearmed.evaluation.estimate import basis_records, estimate, stored_runs
    from clearmed.evaluation.spend import Prices
    from clearmed.evaluation.store import read_records

    done = {r.question_id for r in read_records(spec.run_dir) if not r.degraded} if spec.run_dir.is_dir() else set()
    left = sum(1 for q in spec.questions if q.id not in done)
    if pilot:
        runs = [(spec.run_dir, spec.benchmark)]
    else:
        found = stored_runs(
            config.run.runs_dir,
            config,
            program=spec.program,
            artifact=spec.artifact,
            recorded_pathways=spec.recorded_pathways,
            extra=[spec.run_dir],
        )
        runs = [(folder, manifest.benchmark) for folder, manifest in found]
        if not runs:
            raise UsageError(
                f"no stored run of {spec.program} with this config under {config.run.runs_dir} to estimate from; "
                "run a short pilot instead: add --pilot 5"
            )
    same = [folder for folder, benchmark in runs if benchmark == spec.benchmark]
    folders = same or [folder for folder, _ in runs]
    records = basis_records(folders)
    if not records:
        raise UsageError(f"the stored runs ({', '.join(map(str, folders))}) hold no clean question to estimate from")
    credits = None
    if config.search is not None and config.search.backend == "tavily":
        from clearmed.retrieval.tavily import search_credits

        credits = float(search_credits(config.search.tavily.search_depth))
    result = estimate(
        records,
        Prices.of(config),
        questions=left,
        threads=threads,
        basis_runs=[str(folder) for folder in folders],
        same_benchmark=bool(same),
        credits_per_search=credits,
    )
    return result.render(spec.benchmark)


def run_compare(args: argparse.Namespace) -> int:
    from clearmed.evaluation.compare import load_runs, paired_comparisons
    from clearmed.report.markdown import comparison_table, details_markdown, paired_markdown
    from clearmed.report.plots import write_plots

    runs = load_runs([Path(folder) for folder in args.runs], common=args.common)
    summaries = [run.summary for run in runs]
    scope = ""
    if args.common:
        sizes = {s.benchmark: s.evaluated for s in summaries}
        scope = "\nOn the questions clean in every run: " + ", ".join(f"{b} {n}" for b, n in sizes.items())
        scope += ".\n\n"
    labels = [run.label for run in runs]
    table = (
        scope
        + comparison_table(summaries, labels=labels)
        + paired_markdown(paired_comparisons(runs))
        + details_markdown(summaries, labels=labels)
    )
    Console(soft_wrap=True).print(table, markup=False, highlight=False)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "comparison.md").write_text(table, encoding="utf-8")
        write_plots(summaries, out)
        Console(stderr=True).print(f"comparison written to {out}")
    return 0


def _add_question_arguments(evaluate: argparse.ArgumentParser) -> None:
    """`eval`: the program, and the benchmark questions it runs on."""
    from clearmed.assemble import PROGRAMS

    evaluate.add_argument("--program", default="clear", choices=sorted(PROGRAMS), help="program to evaluate")
    evaluate.add_argument("--benchmark", required=True, help="benchmark name (see `clearmed benchmarks`), or 'demo'")
    evaluate.add_argument(
        "--source", help="local file in the upstream schema, or 'shared' (default: the Hugging Face hub copy)"
    )
    evaluate.add_argument("--split", help="hub split (or label for a local file)")
    evaluate.add_argument(
        "--revision", help="hub branch, tag or commit to read the benchmark at (the commit read goes in the manifest)"
    )
    add_config_arguments(evaluate)
    evaluate.add_argument("--limit", type=int, help="evaluate N questions (deterministic sample with --seed)")
    evaluate.add_argument("--seed", type=int, default=0)
    evaluate.add_argument("--ids", help="a file of question ids to evaluate, in order (one per line or a JSON list)")
    evaluate.add_argument(
        "--skip-bad-rows", action="store_true", help="skip and count malformed benchmark rows instead of stopping"
    )


def _add_run_arguments(evaluate: argparse.ArgumentParser) -> None:
    """`eval`: how the run is made: threads, folder, artifact, degraded questions, budget, estimate, pathways."""
    evaluate.add_argument("--threads", type=int, help="questions in parallel (default: run.num_threads)")
    evaluate.add_argument("--run-dir", help="run folder (default: runs/<config>/<benchmark>/<program>-n<N>-s<seed>)")
    add_artifact_argument(evaluate)
    evaluate.add_argument(
        "--allow-train-overlap", action="store_true", help="evaluate even on ids the artifact was optimized on"
    )
    evaluate.add_argument(
        "--keep-degraded",
        action="store_true",
        help="on resume, keep questions recorded as degraded (a stage failed after its retries) instead of redoing them",
    )
    evaluate.add_argument(
        "--max-cost",
        type=float,
        metavar="USD",
        help="start no question once the run's LM calls have cost this much (default: run.max_cost; exit code 3; "
        "the questions in flight still finish, so a run may overshoot by what --threads questions cost)",
    )
    evaluate.add_argument(
        "--estimate",
        action="store_true",
        help="print the expected calls, tokens, dollars and wall time from stored runs of this program and config",
    )
    evaluate.add_argument(
        "--pilot", type=int, metavar="N", help="with --estimate: run the first N questions first and estimate from them"
    )
    evaluate.add_argument(
        "--pathway",
        action="append",
        default=[],
        metavar="NAME=SOURCE",
        help="take a pathway's answers from a recorded run instead of running it: NAME is parametric, local or "
        "dynamic; SOURCE a MIRAGE prediction folder or a clearmed run folder, or 'absent' to leave the pathway "
        "out (repeatable; the adjudication always runs live)",
    )
    evaluate.add_argument(
        "--shard",
        metavar="K/N",
        help="evaluate shard K of N of the run's questions (round robin by position; join them with clearmed merge)",
    )
    evaluate.add_argument("--stop-after", type=int, help=argparse.SUPPRESS)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    evaluate = commands.add_parser("eval")
    _add_question_arguments(evaluate)
    _add_run_arguments(evaluate)
    evaluate.set_defaults(func=run_eval)

    compare = commands.add_parser("compare")
    compare.add_argument("runs", nargs="+", help="run folders")
    compare.add_argument("--out", help="folder for comparison.md and plots")
    compare.add_argument(
        "--common",
        action="store_true",
        help="re-summarize each run on the question ids all runs of its benchmark answered (fair when sizes differ)",
    )
    compare.set_defaults(func=run_compare)

    benchmarks = commands.add_parser("benchmarks")
    benchmarks.set_defaults(func=list_benchmarks)


def list_benchmarks(args: argparse.Namespace) -> int:
    from rich.table import Table

    from clearmed.benchmarks import available_benchmarks

    table = Table(title="Benchmarks", title_justify="left")
    for column in ("name", "hub id", "mode", "scoring", "shared file"):
        table.add_column(column, overflow="fold")
    for info in available_benchmarks():
        table.add_row(info.name, info.hub_id or "-", info.answer_mode, info.scoring, info.shared_file or "")
    Console().print(table)
    return 0
