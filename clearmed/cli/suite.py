"""`clearmed suite`: a matrix of evaluations (a suite file or the command line; `clearmed.evaluation.suite`), run
cell by cell as the `clearmed eval` commands it prints, then one `clearmed compare` per benchmark.

Every cell is a normal run folder under the suite's out folder, named as `clearmed eval` names its default folder
(OUT/<config>/<benchmark>/<program>-n<limit>-s<seed>), so a suite killed and rerun resumes: a finished cell (summary
written, every question answered and none degraded, the same config) is skipped, a half-done one or one with degraded
questions resumes (as `clearmed eval` redoes them). With `--shards N` a cell is N shard runs (`--shard K/N`, in sibling
folders) and their `clearmed merge` into the cell's folder; once merged, the cell's folder is resumed like any run
(never merged again), and a merge killed before its manifest is redone. `--print-commands`
prints the command lines instead, one a line: the evals (every shard of every cell; independent, one per array task),
the merges (once the evals are done), the comparisons (last).
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from clearmed.core.errors import UsageError

if TYPE_CHECKING:
    from clearmed.evaluation.suite import Suite, SuiteCell


@dataclass(frozen=True)
class _Planned:
    """A cell as commands: its evals (one per shard) with their folders, the merge of the shards (if sharded), and
    the eval that resumes the cell's own folder (a merged cell is a run like any: its degraded questions are redone
    there, never by merging again)."""

    cell: SuiteCell
    run_dir: Path
    evals: list[tuple[list[str], Path]]
    merge: list[str] | None
    resume: list[str]

    def describe(self) -> str:
        cell = self.cell
        return f"{cell.program} on {cell.benchmark.folder} with {cell.config_name}, seed {cell.seed}"


def _eval_argv(suite: Suite, cell: SuiteCell, run_dir: Path, shard: tuple[int, int] | None) -> list[str]:
    benchmark = cell.benchmark
    argv = ["eval", "--program", cell.program, "--benchmark", benchmark.name, "-c", cell.config]
    options = {
        "--source": benchmark.source,
        "--split": benchmark.split,
        "--ids": benchmark.ids,
        "--limit": suite.limit,
        "--seed": cell.seed,
        "--threads": suite.threads,
    }
    argv += [item for flag, value in options.items() if value is not None for item in (flag, str(value))]
    argv += [item for override in suite.overrides for item in ("--set", override)]
    argv += ["--run-dir", str(run_dir)]
    return argv + (["--shard", f"{shard[0]}/{shard[1]}"] if shard else [])


def _plan(suite: Suite) -> list[_Planned]:
    from clearmed.cli.evaluate import default_run_dir

    planned = []
    for cell in suite.cells():
        folder = cell.benchmark.folder
        where = (suite.out, cell.config_name, folder, cell.program, suite.limit, cell.seed)
        run_dir = default_run_dir(*where)
        resume = _eval_argv(suite, cell, run_dir, None)
        if suite.shards == 1:
            planned.append(_Planned(cell, run_dir, [(resume, run_dir)], None, resume))
            continue
        evals = []
        for index in range(1, suite.shards + 1):
            shard_dir = default_run_dir(*where, shard=(index, suite.shards))
            evals.append((_eval_argv(suite, cell, shard_dir, (index, suite.shards)), shard_dir))
        merge = ["merge", *(str(shard_dir) for _, shard_dir in evals), "--out", str(run_dir)]
        planned.append(_Planned(cell, run_dir, evals, merge, resume))
    return planned


def _compare_argvs(suite: Suite, plan: Sequence[_Planned]) -> list[list[str]]:
    """One `clearmed compare` per benchmark of the suite, over every cell of it."""
    return [
        [
            "compare",
            *(str(p.run_dir) for p in plan if p.cell.benchmark is benchmark),
            "--out",
            str(suite.out / "compare" / benchmark.folder),
        ]
        for benchmark in suite.benchmarks
    ]


def _invoke(argv: list[str]) -> int:
    """Run one command line in this process, as `clearmed` would (its errors reach `main` as they are)."""
    from clearmed.cli.main import build_parser

    args = build_parser().parse_args(argv)
    return int(args.func(args))


def _finished(folder: Path, eval_argv: list[str]) -> bool:
    """A run folder the eval command would find done: summary written, every question answered and none degraded (the
    eval would redo those), the same config (a changed one is left to the eval, which refuses it in one line)."""
    from clearmed.cli.main import build_parser
    from clearmed.cli.program_setup import config_from_args
    from clearmed.evaluation.runner import config_digest, same_config_as_snapshot
    from clearmed.evaluation.store import MANIFEST, load_manifest, read_records

    if not (folder / "summary.json").is_file() or not (folder / MANIFEST).is_file():
        return False
    manifest = load_manifest(folder / MANIFEST)
    clean = {record.question_id for record in read_records(folder) if not record.degraded}
    if any(qid not in clean for qid in manifest.question_ids):
        return False
    config = config_from_args(build_parser().parse_args(eval_argv))
    return manifest.config_digest == config_digest(config) or same_config_as_snapshot(folder, config)


def _run_cell(planned: _Planned, console: Console) -> int:
    """Make the cell's run folder, skipping what is done; the exit code of the first command that did not end well.

    A sharded cell whose merge wrote its manifest is a run like any other: it is resumed (its degraded questions
    redone, its summary written), never merged again. Until then its unfinished shards run and the merge follows
    (which redoes a merge killed before its manifest)."""
    from clearmed.evaluation.store import MANIFEST

    if _finished(planned.run_dir, planned.resume):
        console.print(f"  done before: {planned.run_dir}", markup=False, highlight=False)
        return 0
    if planned.merge is None or (planned.run_dir / MANIFEST).is_file():
        return _invoke(planned.resume)
    for argv, folder in planned.evals:
        if _finished(folder, argv):
            continue
        code = _invoke(argv)
        if code:
            return code
    return _invoke(planned.merge)


def _suite_of(args: argparse.Namespace) -> Suite:
    from clearmed.evaluation.suite import load_suite, suite_from_table

    matrix = bool(args.program or args.benchmark or args.config or args.seed or args.limit)
    if args.suite_file:
        if matrix:
            raise UsageError("give a suite file or a matrix (--program, --benchmark, -c, --seed, --limit), not both")
        suite = load_suite(Path(args.suite_file))
    elif not (args.program and args.benchmark and args.config and args.out):
        raise UsageError("give a suite file, or a matrix: --program, --benchmark and -c (each repeatable) and --out")
    else:
        benchmarks = [dict(zip(("name", "source"), item.split("=", 1), strict=False)) for item in args.benchmark]
        table = {"out": args.out, "configs": args.config, "programs": args.program, "benchmarks": benchmarks}
        suite = suite_from_table({**table, "seeds": args.seed or [0], "limit": args.limit}, "the matrix")
    if args.shards is not None and args.shards < 1:
        raise UsageError(f"--shards must be at least 1, not {args.shards}")
    if args.threads is not None and args.threads < 1:
        raise UsageError(f"--threads must be at least 1, not {args.threads}")
    given = {
        "out": Path(args.out) if args.out else None,
        "shards": args.shards,
        "threads": args.threads,
        "overrides": [*suite.overrides, *args.overrides] if args.overrides else None,
    }
    return suite.model_copy(update={key: value for key, value in given.items() if value is not None})


def run_suite(args: argparse.Namespace) -> int:
    from clearmed.config import load_config

    suite = _suite_of(args)
    for config in suite.configs:  # a config that does not load is refused before any cell runs or is printed
        load_config(config, suite.overrides)
    plan = _plan(suite)
    compares = _compare_argvs(suite, plan)
    if args.print_commands:
        sections = {
            "eval": [argv for planned in plan for argv, _ in planned.evals],
            "merge": [planned.merge for planned in plan if planned.merge is not None],
            "compare": compares,
        }
        chosen = list(sections) if args.print_commands == "all" else [args.print_commands]
        for argv in (argv for name in chosen for argv in sections[name]):
            print(f"clearmed {shlex.join(argv)}")
        return 0
    console = Console(stderr=True)
    for number, planned in enumerate(plan, start=1):
        console.print(f"suite: cell {number}/{len(plan)}: {planned.describe()}", markup=False, highlight=False)
        code = _run_cell(planned, console)
        if code:
            console.print(
                f"suite: stopped at cell {number} (exit {code}); rerun the same suite command to resume",
                markup=False,
                highlight=False,
            )
            return code
    for argv in compares:
        _invoke(argv)
    console.print(f"suite: {len(plan)} cells done; comparisons in {suite.out / 'compare'}", markup=False)
    return 0


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    suite = commands.add_parser("suite")
    suite.add_argument("suite_file", nargs="?", metavar="SUITE.toml", help="a suite file (clearmed.evaluation.suite)")
    suite.add_argument("--program", action="append", default=[], help="a program of the matrix (repeatable)")
    suite.add_argument(
        "--benchmark", action="append", default=[], metavar="NAME[=SOURCE]", help="a benchmark of the matrix"
    )
    suite.add_argument("-c", "--config", action="append", default=[], help="a config of the matrix (repeatable)")
    suite.add_argument("--seed", action="append", type=int, default=[], help="a seed of the matrix (default 0)")
    suite.add_argument("--limit", type=int, help="a seeded sample of N questions of each benchmark")
    suite.add_argument("--out", help="the suite's folder (default for a file: runs/suites/<its name>)")
    suite.add_argument("--shards", type=int, help="run every cell as N shards and merge them")
    suite.add_argument("--threads", type=int, help="questions in parallel in every cell")
    suite.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override a setting of every cell's config (repeatable; added to the suite file's overrides)",
    )
    suite.add_argument(
        "--print-commands",
        nargs="?",
        const="all",
        choices=["all", "eval", "merge", "compare"],
        help="print the command lines (all, or only the evals, merges or comparisons) instead of running them",
    )
    suite.set_defaults(func=run_suite)
