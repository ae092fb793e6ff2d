"""`clearmed eval` and `clearmed compare`: thin wrappers over `clearmed.evaluation`."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from rich.console import Console

from clearmed.errors import UsageError


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "run"


def default_run_dir(
    runs_dir: Path, config_name: str, benchmark: str, program: str, limit: int | None, seed: int
) -> Path:
    """The same command always names the same folder, so rerunning it resumes."""
    size = f"n{limit}" if limit else "all"
    return runs_dir / _slug(config_name) / _slug(benchmark) / f"{_slug(program)}-{size}-s{seed}"


def shared_source(benchmark: str) -> Path:
    """`--source shared`: the benchmark's file in the shared development data folder."""
    from clearmed.benchmarks import benchmark_info
    from clearmed.retrieval.corpus import shared_data_root

    info = benchmark_info(benchmark)
    if not info.shared_file:
        raise UsageError(f"{benchmark} has no file in the shared data; pass --source <file> or use the hub")
    return shared_data_root() / "benchmarks" / info.shared_file


def _load_questions(args: argparse.Namespace):  # -> BenchmarkSet
    from clearmed.benchmarks import BenchmarkSet, load_benchmark, sample

    if args.benchmark == "demo":
        from clearmed.demo_bundle import demo_questions

        chosen = sample(list(demo_questions()), limit=args.limit, seed=args.seed)
        return BenchmarkSet(name="demo", source="built-in demo bundle", split="demo", questions=chosen)
    source = shared_source(args.benchmark) if args.source == "shared" else args.source
    on_error = "skip" if args.skip_bad_rows else "raise"
    if args.ids:  # exactly these questions, in the file's order (a held-out test split, say)
        from clearmed.optimize.splits import read_id_file

        if args.limit:
            raise UsageError("give --ids or --limit, not both")
        wanted = read_id_file(args.ids)
        bench = load_benchmark(args.benchmark, source=source, split=args.split, on_error=on_error)
        by_id = {q.id: q for q in bench.questions}
        missing = [qid for qid in wanted if qid not in by_id]
        if missing:
            raise UsageError(f"--ids: {len(missing)} ids are not in {args.benchmark} (first: {missing[0]})")
        return bench.model_copy(update={"questions": [by_id[qid] for qid in wanted]})
    return load_benchmark(
        args.benchmark, source=source, split=args.split, limit=args.limit, seed=args.seed, on_error=on_error
    )


def run_eval(args: argparse.Namespace) -> int:
    from clearmed.assemble import build_program
    from clearmed.config import load_config
    from clearmed.evaluation import EvalSpec, run_evaluation, summarize, write_plots
    from clearmed.evaluation.report import comparison_table, details_markdown
    from clearmed.evaluation.store import RunStore
    from clearmed.metrics import audit_leakage

    config = load_config(args.config)
    bench = _load_questions(args)
    if not bench.questions:
        raise UsageError(f"{args.benchmark}: no questions to evaluate")
    from clearmed.optimize.artifacts import apply_artifact, refuse_seen_ids, with_artifact

    artifact, config = with_artifact(args.program_artifact, config)
    if artifact is not None:
        refuse_seen_ids([q.id for q in bench.questions], artifact, allow=args.allow_train_overlap)
    label = args.program if artifact is None else f"{args.program}+{artifact.path.resolve().name}"
    run_dir = (
        Path(args.run_dir)
        if args.run_dir
        else default_run_dir(
            config.run.runs_dir, Path(config.source).stem, args.benchmark, label, args.limit, args.seed
        )
    )
    console = Console(stderr=True)
    if bench.n_skipped:
        console.print(f"[yellow]{bench.n_skipped} malformed rows skipped[/]", highlight=False)
        for issue in bench.skipped[:3]:
            console.print(f"  {issue.location}: {issue.reason}", markup=False, highlight=False)
    program = build_program(args.program, config)
    apply_artifact(program, artifact, config)
    spec = EvalSpec(
        program=args.program,
        benchmark=args.benchmark,
        source=bench.source,
        questions=bench.questions,
        run_dir=run_dir,
        limit=args.limit,
        seed=args.seed,
        artifact=str(artifact.path.resolve()) if artifact is not None else None,
    )
    from clearmed.evaluation.scoring import scorer_for

    records = run_evaluation(
        spec,
        config,
        program,
        scorer=scorer_for(config),
        num_threads=args.threads or config.run.num_threads,
        console=console,
        stop_after=args.stop_after,
    )
    with RunStore(run_dir) as store:
        manifest = store.read_manifest()
        assert manifest is not None
        audits = [audit_leakage(r.decision.bundle.question, r.decision) for r in records]
        summary = summarize(records, manifest, seed=args.seed, leaks=audits)
        store.write_json("summary.json", summary.model_dump_json(indent=2))
        store.write_json("summary.md", comparison_table([summary]) + details_markdown([summary]))
        store.write_json("leakage.json", json.dumps([a.model_dump() for a in audits if a.flagged], indent=2))
        write_plots([summary], run_dir / "plots")
    from clearmed.commands.report import write_run_report

    write_run_report(run_dir, console)  # after the lock is released: the report only reads the folder
    Console(soft_wrap=True).print(
        comparison_table([summary]) + details_markdown([summary]), markup=False, highlight=False
    )
    console.print(f"run folder: {run_dir}")
    return 0


def run_compare(args: argparse.Namespace) -> int:
    from clearmed.evaluation import comparison_table, write_plots
    from clearmed.evaluation.compare import load_runs, paired_comparisons, paired_markdown
    from clearmed.evaluation.report import details_markdown

    runs = load_runs([Path(folder) for folder in args.runs], common=args.common)
    summaries = [run.summary for run in runs]
    scope = ""
    if args.common:
        sizes = {s.benchmark: s.evaluated for s in summaries}
        scope = "\nOn the questions all runs of a benchmark share: " + ", ".join(f"{b} {n}" for b, n in sizes.items())
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


def register(commands: argparse._SubParsersAction) -> None:
    from clearmed.assemble import PROGRAMS

    evaluate = commands.add_parser("eval", help="evaluate a program on a benchmark (resumable run folder)")
    evaluate.add_argument("--program", default="clear", choices=sorted(PROGRAMS), help="program to evaluate")
    evaluate.add_argument("--benchmark", required=True, help="benchmark name (see `clearmed benchmarks`), or 'demo'")
    evaluate.add_argument(
        "--source", help="local file in the upstream schema, or 'shared' (default: the Hugging Face hub copy)"
    )
    evaluate.add_argument("--split", help="hub split (or label for a local file)")
    evaluate.add_argument("-c", "--config", help="packaged config name or TOML path (default: embedded)")
    evaluate.add_argument("--limit", type=int, help="evaluate N questions (deterministic sample with --seed)")
    evaluate.add_argument("--seed", type=int, default=0)
    evaluate.add_argument("--ids", help="a file of question ids to evaluate, in order (one per line or a JSON list)")
    evaluate.add_argument(
        "--skip-bad-rows", action="store_true", help="skip and count malformed benchmark rows instead of stopping"
    )
    evaluate.add_argument("--threads", type=int, help="questions in parallel (default: run.num_threads)")
    evaluate.add_argument("--run-dir", help="run folder (default: runs/<config>/<benchmark>/<program>-n<N>-s<seed>)")
    evaluate.add_argument("--program-artifact", help="a `clearmed compile` / `clearmed tune` artifact folder to load")
    evaluate.add_argument(
        "--allow-train-overlap", action="store_true", help="evaluate even on ids the artifact was optimized on"
    )
    evaluate.add_argument("--stop-after", type=int, help=argparse.SUPPRESS)
    evaluate.set_defaults(func=run_eval)

    compare = commands.add_parser("compare", help="put finished runs side by side")
    compare.add_argument("runs", nargs="+", help="run folders")
    compare.add_argument("--out", help="folder for comparison.md and plots")
    compare.add_argument(
        "--common",
        action="store_true",
        help="re-summarize each run on the question ids all runs of its benchmark answered (fair when sizes differ)",
    )
    compare.set_defaults(func=run_compare)

    benchmarks = commands.add_parser("benchmarks", help="list the benchmarks with hub ids and scoring")
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
