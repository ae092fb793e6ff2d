"""`clearmed.compare_runs`: the one door of `clearmed compare` and of a suite's comparisons. Finished run folders
(or a suite's folder: every run below it, as `clearmed report` and `export` take it) side by side
(`clearmed.numbers.compare`), paired against the first run of each benchmark, a chosen `baseline`
or all pairs, and with `out` every file of the comparison written there (`clearmed.report.comparison_files`:
Markdown, CSV, JSON, a LaTeX table and the plots as PNG, PDF or SVG)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import get_args

from pydantic import BaseModel, ConfigDict

from clearmed.core.errors import UsageError
from clearmed.numbers.compare import Comparison, compare
from clearmed.numbers.results_table import run_folders
from clearmed.report.markdown import comparison_markdown
from clearmed.report.plots import PlotFormat

__all__ = ["CompareRequest", "CompareResult", "compare_runs"]


class CompareRequest(BaseModel):
    """One field per `clearmed compare` option of the same name: `compare_runs(request.runs, **the others)`."""

    model_config = ConfigDict(extra="forbid")

    runs: list[str | Path]  # run folders, or a suite's folder (every run below it)
    out: str | Path | None = None
    common: bool = False
    baseline: str | Path | None = None
    all_pairs: bool = False
    plot_format: PlotFormat = "png"


class CompareResult(BaseModel):
    """A comparison, its Markdown (as `clearmed compare` prints it) and the files written (none without `out`)."""

    model_config = ConfigDict(extra="forbid")

    comparison: Comparison
    markdown: str
    files: list[Path] = []


def compare_runs(
    runs: Sequence[str | Path],
    *,
    out: str | Path | None = None,
    common: bool = False,
    baseline: str | Path | None = None,
    all_pairs: bool = False,
    plot_format: PlotFormat = "png",
) -> CompareResult:
    """Compare finished run folders, or the runs below a suite's folder (`results_table.run_folders`: a folder
    holding no manifest.json stands for every run folder below it); `common`: each on the question ids clean in every
    run of its benchmark. Each run is paired against the first run of its benchmark, or against the run folder
    `baseline` (compared first if it is not among `runs`), or with `all_pairs` every pair; with several pairs a
    Holm-adjusted p is added. The keywords are `clearmed compare`'s options, named as its argparse destinations."""
    if plot_format not in get_args(PlotFormat):
        raise UsageError(f"--plot-format must be one of {', '.join(get_args(PlotFormat))}, not {plot_format!r}")
    comparison = compare(
        [folder for run in runs for folder in run_folders(Path(run))],  # a run named twice is compared with itself
        common=common,
        baseline=Path(baseline) if baseline is not None else None,
        all_pairs=all_pairs,
    )
    files: list[Path] = []
    if out is not None:
        from clearmed.report.comparison_files import write_comparison  # draws: matplotlib only when written

        files = write_comparison(comparison, Path(out), plot_format)
    return CompareResult(comparison=comparison, markdown=comparison_markdown(comparison), files=files)
