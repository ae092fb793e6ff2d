"""`clearmed.evaluate_suite`: a suite (`clearmed.api.suite_file`) run in this process, every cell (and every shard
of a cell) one `EvalRequest` through `clearmed.evaluate`; `clearmed.merge_shards`: the shards of a run joined into
one finished run folder. `clearmed suite` and `clearmed merge` parse their arguments and call these.

Every cell is a normal run folder under the suite's out folder, named as `clearmed eval` names its default folder
(OUT/<config>/<benchmark>/<program>-n<limit>-s<seed>, then `-<set>` for a sweep's set), so a suite killed and rerun resumes: a finished cell (summary
written, every question answered and none degraded, the same config) is skipped, a half-done one or one with
degraded questions resumes (as `clearmed eval` redoes them). With `shards = N` a cell is N shard runs (shard K/N, in
sibling folders) and their merge into the cell's folder; once merged, the cell's folder is resumed like any run
(never merged again), and a merge killed before its manifest is redone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from clearmed.api.config_choice import request_config
from clearmed.api.evaluate import LeftToRedo, evaluate_to_exit_code, left_to_redo
from clearmed.api.request import EvalRequest
from clearmed.core.console import user_console

if TYPE_CHECKING:
    from clearmed.api.compare import CompareResult
    from clearmed.api.suite_file import Suite, SuiteCell
    from clearmed.evaluation import RunSummary

__all__ = ["PlannedCell", "compare_suite", "evaluate_suite", "merge_shards", "plan_suite", "suite_comparisons"]


@dataclass(frozen=True)
class PlannedCell:
    """A cell as requests: its evals (one per shard; each names its folder), whether they are merged into the
    cell's folder, and the eval that resumes the cell's own folder (a merged cell is a run like any: its degraded
    questions are redone there, never by merging again)."""

    cell: SuiteCell
    run_dir: Path
    evals: list[EvalRequest]
    resume: EvalRequest

    @property
    def sharded(self) -> bool:
        return self.evals != [self.resume]

    @property
    def shard_dirs(self) -> list[Path]:
        return [Path(str(request.run_dir)) for request in self.evals]

    def describe(self) -> str:
        cell = self.cell
        swept = f" ({cell.label})" if cell.label else ""
        return f"{cell.program} on {cell.benchmark.folder} with {cell.config_name}{swept}, seed {cell.seed}"


def cell_request(suite: Suite, cell: SuiteCell, run_dir: Path, shard: tuple[int, int] | None) -> EvalRequest:
    """The `clearmed eval` of one cell (or one shard of it): the suite's template (`Suite.template`: every option the
    file sets) with the cell's axes put in, as its command line would parse (paths as text)."""
    benchmark = cell.benchmark
    axes = {
        "program": cell.program,
        "benchmark": benchmark.name,
        "config": cell.config,
        "source": benchmark.source,
        "split": benchmark.split,
        "ids": benchmark.ids,
        "seed": cell.seed,
        "overrides": [*suite.template.overrides, *cell.overrides],
        "run_dir": str(run_dir),
        "shard": f"{shard[0]}/{shard[1]}" if shard else None,
    }
    return suite.template.model_copy(update=axes)


def plan_suite(suite: Suite) -> list[PlannedCell]:
    """The suite's cells as requests, each set of a sweep (`Suite.sets`) in its own folder; a config that does not
    load, with any set, is refused first, in one line (before any cell runs or is printed)."""
    from clearmed.config import load_config
    from clearmed.evaluation.folder import default_run_dir

    for config in suite.configs:
        for overrides in suite.sets.values():
            load_config(config, [*suite.template.overrides, *overrides])
    planned = []
    for cell in suite.cells():
        where = (suite.out, cell.config_name, cell.benchmark.folder, cell.program, suite.template.limit, cell.seed)
        run_dir = default_run_dir(*where, label=cell.label)
        resume = cell_request(suite, cell, run_dir, None)
        shards = [(index, suite.shards) for index in range(1, suite.shards + 1)] if suite.shards > 1 else []
        evals = [
            cell_request(suite, cell, default_run_dir(*where, shard=shard, label=cell.label), shard) for shard in shards
        ]
        planned.append(PlannedCell(cell, run_dir, evals or [resume], resume))
    return planned


def suite_comparisons(suite: Suite, plan: Sequence[PlannedCell]) -> list[tuple[list[Path], Path]]:
    """One comparison per benchmark of the suite, over every cell of it: (the run folders, the comparison's folder)."""
    return [
        ([p.run_dir for p in plan if p.cell.benchmark is benchmark], suite.out / "compare" / benchmark.folder)
        for benchmark in suite.benchmarks
    ]


def compare_suite(suite: Suite, plan: Sequence[PlannedCell]) -> list[CompareResult]:
    """The suite's comparisons (`suite_comparisons`), each through `clearmed.api.compare.compare_runs` into its folder
    (OUT/compare/<benchmark>): the same files as `clearmed compare --out`."""
    from clearmed.api.compare import compare_runs

    return [compare_runs(folders, out=out) for folders, out in suite_comparisons(suite, plan)]


def evaluate_suite(
    suite: Suite,
    *,
    on_summary: Callable[[RunSummary], object] | None = None,
    console: Console | None = None,
    quiet: bool = False,
) -> int:
    """Run every cell of `suite` not done before, in order, in this process; its exit code (`ExitCode`): 0 when all
    are done; 4 when a cell ended with degraded or unrecorded questions (the other cells still run, and the closing
    line names each such cell's folder; rerunning the suite redoes those questions); 3 when a cell reached its
    budget (the suite stops there; rerunning it resumes). A fatal service error or bad input is one line
    (`UsageError`). `on_summary` receives each summary a cell (or merge) writes, as the commands print them. The
    comparisons (`suite_comparisons`) are left to the caller (`clearmed suite` then calls `compare_suite`).
    `quiet`: every run says one line (`EvalRequest.quiet`), and the suite its closing line."""
    from clearmed.core.exit_codes import ExitCode

    console = console or user_console(stderr=True, soft_wrap=True)
    plan = plan_suite(suite)
    quiet = quiet or suite.template.quiet  # the file's `quiet = true` quiets the suite's own lines too
    if quiet:
        plan = [_quietly(planned) for planned in plan]
    failed: list[str] = []  # the folders of the cells left with questions to redo, each with what
    for number, planned in enumerate(plan, start=1):
        if not quiet:
            console.print(f"suite: cell {number}/{len(plan)}: {planned.describe()}", markup=False, highlight=False)
        code, left = _run_cell(planned, console, on_summary or (lambda summary: None))
        if left:
            failed.append(f"{planned.run_dir} ({left})")
        if code not in (ExitCode.DONE, ExitCode.UNFINISHED):
            console.print(
                f"suite: stopped at cell {number} (exit {code}); rerun the same suite command to resume",
                markup=False,
                highlight=False,
            )
            return code
    if failed:
        console.print(
            f"suite: {len(failed)} of {len(plan)} cells failed: {'; '.join(failed)}; rerun the same suite command to "
            "redo their questions (the comparisons follow once every cell is done)",
            markup=False,
            highlight=False,
        )
        return ExitCode.UNFINISHED
    return ExitCode.DONE


def _quietly(planned: PlannedCell) -> PlannedCell:
    """The cell with each of its evals saying one line (`EvalRequest.quiet`)."""
    evals = [request.model_copy(update={"quiet": True}) for request in planned.evals]
    return replace(planned, evals=evals, resume=planned.resume.model_copy(update={"quiet": True}))


def merge_shards(
    runs: Sequence[str | Path], out: str | Path, *, console: Console | None = None, quiet: bool = False
) -> RunSummary:
    """The run folders of all N shards of a run (`shard="K/N"`) joined into `out` (new, or an earlier merge of them)
    and finished as `clearmed.evaluate` finishes its folder (summary, tables, plots, HTML report), at the prices of
    the shards' config; its summary. `quiet`: the merged run's one line (`run_line`) is all it prints."""
    from clearmed.api.evaluate import run_line
    from clearmed.evaluation.merge import join_shard_folders
    from clearmed.numbers.compare import snapshot_prices
    from clearmed.report.run_folder import finish_run_folder

    console = console or user_console(stderr=True, soft_wrap=True)
    folder = Path(out)
    join_shard_folders([Path(run) for run in runs], folder)
    finishing = user_console(stderr=True, quiet=True) if quiet else console
    summary = finish_run_folder(folder, snapshot_prices(folder), finishing)
    console.print(run_line(summary, folder) if quiet else f"run folder: {folder}", markup=False, highlight=False)
    return summary


def _finished(request: EvalRequest) -> bool:
    """The request's run folder is done (`clearmed.evaluation.folder.finished`) with the request's config."""
    from clearmed.evaluation.folder import finished

    return finished(Path(str(request.run_dir)), request_config(request))


def _run_cell(
    planned: PlannedCell, console: Console, on_summary: Callable[[RunSummary], object]
) -> tuple[int, LeftToRedo]:
    """Make the cell's run folder, skipping what is done: the exit code (of the first eval that stopped the cell,
    else 4 when the cell's folder is left with questions to redo, else 0) and what a rerun redoes there.

    A sharded cell whose merge wrote its manifest is a run like any other: it is resumed (its degraded questions
    redone, its summary written), never merged again. Until then its unfinished shards run and the merge follows
    (which redoes a merge killed before its manifest); shards left with degraded questions are merged all the same,
    and the rerun redoes them in the merged folder."""
    from clearmed.core.exit_codes import ExitCode
    from clearmed.evaluation.store import MANIFEST

    left = LeftToRedo(0, 0)

    def of_the_cell(summary: RunSummary) -> None:
        nonlocal left
        left = left_to_redo(summary)
        on_summary(summary)

    if _finished(planned.resume):
        console.print(f"  done before: {planned.run_dir}", markup=False, highlight=False)
        return ExitCode.DONE, left
    if not planned.sharded or (planned.run_dir / MANIFEST).is_file():
        return evaluate_to_exit_code(planned.resume, of_the_cell), left
    for request in planned.evals:  # a shard's questions to redo are the merged folder's too: that one is named
        code = ExitCode.DONE if _finished(request) else evaluate_to_exit_code(request, on_summary)
        if code not in (ExitCode.DONE, ExitCode.UNFINISHED):
            return code, left
    of_the_cell(merge_shards(planned.shard_dirs, planned.run_dir, quiet=planned.resume.quiet))
    return (ExitCode.UNFINISHED if left else ExitCode.DONE), left
