"""`clearmed report`: a static HTML report of run folders, to open from disk and click through.

Layout of the output folder (every link between pages is relative, every plot is inlined, nothing is fetched):

    index.html                       overview: summary table, plots, per-benchmark sections
    runs/<run>/index.html            the question list (filter, search, sort)
    runs/<run>/q/<NNNN-id>.html      one question's whole trail
    compare/<benchmark>.html         two or more runs of one benchmark: paired table, gained and lost questions
    compare/<pair>/<NNNN-id>.html    one gained or lost question, both trails side by side

Everything from a run (questions, evidence, model output) is escaped by Jinja2's autoescaping, and every page
carries a Content-Security-Policy that lets only the report's own script run: a page written to attack the
program is shown as text. Summaries are recomputed from the records with this version's code, so a run that
is still going (or was killed) can be looked at too.
"""

from __future__ import annotations

import base64
import hashlib
import re
import shutil
from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from jinja2 import Environment, PackageLoader, StrictUndefined
from pydantic import BaseModel, ConfigDict

from clearmed.core.version import __version__
from clearmed.evaluation.store import MANIFEST, EvalRecord, RunManifest, RunStoreError, load_manifest, read_records
from clearmed.evaluation.summary import RunSummary, summarize
from clearmed.metrics import LeakageReport, PairedComparison, audit_leakage, judge_table

# compare.py's own helpers, so that run labels, what counts as scored, and the paired test are the same as in
# `clearmed compare` (they are module-private there; making them public is a one-line follow-up in compare.py).
from clearmed.numbers.compare import ComparedRun, _correct, _labels, paired_comparisons
from clearmed.report.html_views import (
    PassageView,
    QuestionPage,
    QuestionRow,
    answer_display,
    fold_text,
    question_page,
    question_row,
    route_colour,
    route_meaning,
)
from clearmed.report.markdown import accuracy_cell, clean_cell
from clearmed.report.plots import run_plots

if TYPE_CHECKING:
    from rich.console import Console

# Written into the output folder: a folder holding it is a report this module may overwrite.
MARKER = ".clearmed-report"


class RunView(BaseModel):
    """One run folder as the report shows it."""

    model_config = ConfigDict(extra="forbid")

    label: str
    slug: str
    folder: str
    manifest: RunManifest
    summary: RunSummary
    records: list[EvalRecord]
    leaks: list[LeakageReport]
    rows: list[QuestionRow]
    judge_markdown: str = ""


class PairQuestion(BaseModel):
    """A question one run got right and the other wrong."""

    model_config = ConfigDict(extra="forbid")

    question_id: str
    text: str
    gold: str
    page: str  # the baseline's page name (also the side-by-side page's)
    other_page: str
    base_answer: str
    other_answer: str
    base_route: str
    other_route: str


class PairView(BaseModel):
    model_config = ConfigDict(extra="forbid")

    slug: str
    base_slug: str
    other_slug: str
    pair: PairedComparison
    gained: list[PairQuestion]
    lost: list[PairQuestion]


class ComparisonView(BaseModel):
    model_config = ConfigDict(extra="forbid")

    benchmark: str
    slug: str
    runs: list[RunView]
    pairs: list[PairView]


class BenchmarkGroup(BaseModel):
    model_config = ConfigDict(extra="forbid")

    benchmark: str
    slug: str
    runs: list[RunView]
    plots: dict[str, str]


class HtmlReport(BaseModel):
    """What was written: the entry page, how many pages, and their total size."""

    model_config = ConfigDict(extra="forbid")

    out: Path
    index: Path
    pages: int
    bytes: int
    question_pages: int
    comparisons: int


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-.") or "run"


def _unique(names: Iterable[str]) -> list[str]:
    seen: Counter[str] = Counter()
    out = []
    for name in names:
        seen[name] += 1
        out.append(name if seen[name] == 1 else f"{name}-{seen[name]}")
    return out


def load_run_views(folders: Sequence[Path]) -> list[RunView]:
    """Read each run folder and summarize it (with this version's code, so unfinished runs work too)."""
    from clearmed.evaluation.spend_log import paid_calls  # it imports the programs' usage sink

    if not folders:
        raise RunStoreError("give at least one run folder")
    resolved = [folder.resolve() for folder in folders]
    twice = sorted({str(f) for f in resolved if resolved.count(f) > 1})
    if twice:
        raise RunStoreError(f"run folder given twice: {', '.join(twice)}")
    labels = _labels(list(folders))
    slugs = _unique(_slug(label) for label in labels)
    views = []
    for folder, label, slug in zip(folders, labels, slugs, strict=True):
        manifest = load_manifest(folder / MANIFEST)
        records = sorted(read_records(folder), key=lambda record: record.index)
        leaks = [audit_leakage(r.decision.bundle.question, r.decision) for r in records]
        summary = summarize(records, manifest, seed=manifest.seed, leaks=leaks, paid=paid_calls(folder))
        views.append(
            RunView(
                label=label,
                slug=slug,
                folder=str(folder),
                manifest=manifest,
                summary=summary,
                records=records,
                leaks=leaks,
                rows=[question_row(r, leak) for r, leak in zip(records, leaks, strict=True)],
                judge_markdown=judge_table(summary.judge) if summary.judge else "",
            )
        )
    return views


def _pair_questions(base: RunView, other: RunView, ids: list[str]) -> list[PairQuestion]:
    by_id = {r.question_id: (r, row) for r, row in zip(base.records, base.rows, strict=True)}
    other_by_id = {r.question_id: (r, row) for r, row in zip(other.records, other.rows, strict=True)}
    items = []
    for qid in sorted(ids, key=lambda q: by_id[q][0].index):
        (base_record, base_row), (other_record, other_row) = by_id[qid], other_by_id[qid]
        items.append(
            PairQuestion(
                question_id=qid,
                text=base_row.text,
                gold=base_row.gold,
                page=base_row.page,
                other_page=other_row.page,
                base_answer=answer_display(base_record.decision),
                other_answer=answer_display(other_record.decision),
                base_route=base_row.route,
                other_route=other_row.route,
            )
        )
    return items


def _by_benchmark(runs: Sequence[RunView]) -> dict[str, list[RunView]]:
    groups: dict[str, list[RunView]] = {}
    for run in runs:
        groups.setdefault(run.manifest.benchmark, []).append(run)
    return groups


def comparisons(runs: Sequence[RunView]) -> list[ComparisonView]:
    """Benchmarks with two or more runs: each run against the first run of its benchmark.

    The paired counts and the McNemar p are `compare.paired_comparisons`' own; the gained and lost lists are
    the question ids behind those counts (checked to match them)."""
    views = []
    for benchmark, group in _by_benchmark(runs).items():
        if len(group) < 2:
            continue
        compared = [
            ComparedRun(label=r.label, folder=r.folder, summary=r.summary, correct=_correct(r.records)) for r in group
        ]
        by_label = {r.label: (r, c) for r, c in zip(group, compared, strict=True)}
        pairs = []
        for pair in paired_comparisons(compared):
            (base, base_c), (other, other_c) = by_label[pair.baseline], by_label[pair.other]
            common = base_c.correct.keys() & other_c.correct.keys()
            gained = [q for q in common if other_c.correct[q] and not base_c.correct[q]]
            lost = [q for q in common if base_c.correct[q] and not other_c.correct[q]]
            if (len(gained), len(lost)) != (pair.gained, pair.lost):  # the lists must be the table's questions
                raise AssertionError(f"paired lists disagree with the paired counts for {pair.other}")
            pairs.append(
                PairView(
                    slug=f"{base.slug}--vs--{other.slug}",
                    base_slug=base.slug,
                    other_slug=other.slug,
                    pair=pair,
                    gained=_pair_questions(base, other, gained),
                    lost=_pair_questions(base, other, lost),
                )
            )
        views.append(ComparisonView(benchmark=benchmark, slug=_slug(benchmark), runs=group, pairs=pairs))
    return views


def _group_by_section(views: Sequence[PassageView]) -> list[tuple[str, list[PassageView]]]:
    groups: list[tuple[str, list[PassageView]]] = []
    for view in views:
        if not groups or groups[-1][0] != view.section:
            groups.append((view.section, []))
        groups[-1][1].append(view)
    return groups


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def environment() -> Environment:
    env = Environment(
        loader=PackageLoader("clearmed.report", "templates"),
        autoescape=True,  # every value from a run is data: escaped, whatever it contains
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        route_colour=route_colour,
        route_meaning=route_meaning,
        accuracy_cell=accuracy_cell,
        clean_cell=clean_cell,
        pct=_pct,
        groupby_section=_group_by_section,
        fold=fold_text,
        basename=lambda path: Path(path).name or path,
    )
    return env


def _filter_script() -> tuple[str, str]:
    """The list page's script, and its CSP source expression (the only script a page may run)."""
    script = resources.files("clearmed.report").joinpath("templates/filter.js").read_text(encoding="utf-8")
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    return script, f"'sha256-{digest}'"


def _filters(run: RunView) -> list[tuple[str, str, list[tuple[str, int]]]]:
    def counted(values: Iterable[str]) -> list[tuple[str, int]]:
        return sorted(Counter(values).items())

    rows = run.rows
    return [
        ("correct", "correct", counted(r.correct for r in rows)),
        ("route", "route", counted(r.route for r in rows)),
        ("rule", "deciding rule", counted(r.rule for r in rows)),
        ("pattern", "agreement", counted(r.pattern for r in rows)),
        ("status", "status", counted(r.status for r in rows)),
        ("error", "error recorded", counted("yes" if r.error else "no" for r in rows)),
        ("leak", "leakage flag", counted("yes" if r.leak else "no" for r in rows)),
    ]


def _prepare_out(out: Path) -> None:
    """Refuse to write into a folder that holds anything but an earlier report; clear an earlier report's pages."""
    if out.exists() and not out.is_dir():
        raise RunStoreError(f"{out} is a file; --out needs a folder")
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).exists():
        raise RunStoreError(f"{out} is not empty and holds no clearmed report; choose another --out")
    for sub in ("runs", "compare"):
        if (out / sub).is_dir():
            shutil.rmtree(out / sub)  # pages of runs no longer in the report must not linger
    out.mkdir(parents=True, exist_ok=True)
    (out / MARKER).write_text("written by clearmed report; the folder is rewritten on the next report\n")


class _PageWriter:
    """Renders the report's templates into files, and remembers which files it wrote."""

    def __init__(self, env: Environment) -> None:
        self._env = env
        self.written: list[Path] = []

    def write(self, path: Path, template: str, **context: object) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        html = self._env.get_template(template).render(version=__version__, **context)
        path.write_text(html, encoding="utf-8")
        self.written.append(path)


def _benchmark_groups(runs: Sequence[RunView]) -> list[BenchmarkGroup]:
    return [
        BenchmarkGroup(
            benchmark=name,
            slug=_slug(name),
            runs=group,
            # A run with no finished question yet has nothing to plot.
            plots=run_plots([r.summary for r in group], [r.label for r in group])
            if any(r.records for r in group)
            else {},
        )
        for name, group in _by_benchmark(runs).items()
    ]


def _write_run(pages: _PageWriter, out: Path, run: RunView, script: tuple[str, str]) -> list[QuestionPage]:
    """A run's question list (with the filter `script` and its CSP source) and one page per question."""
    base = out / "runs" / run.slug
    text, source = script
    pages.write(
        base / "index.html",
        "questions.html.j2",
        root="../../",
        script_src=source,
        script=text,
        run=run,
        filters=_filters(run),
    )
    views = [question_page(r, leak) for r, leak in zip(run.records, run.leaks, strict=True)]
    for i, page in enumerate(views):
        pages.write(
            base / "q" / page.row.page,
            "question.html.j2",
            root="../../../",
            script_src="'none'",
            run=run,
            page=page,
            previous=views[i - 1].row.page if i > 0 else "",
            next=views[i + 1].row.page if i + 1 < len(views) else "",
        )
    return views


def _write_comparison(
    pages: _PageWriter, out: Path, comparison: ComparisonView, by_run: dict[str, dict[str, QuestionPage]]
) -> None:
    """A benchmark's comparison page, and a side-by-side page for each question gained or lost."""
    pages.write(
        out / "compare" / f"{comparison.slug}.html",
        "compare.html.j2",
        root="../",
        script_src="'none'",
        comparison=comparison,
    )
    for pair in comparison.pairs:
        for item in [*pair.gained, *pair.lost]:
            pages.write(
                out / "compare" / pair.slug / item.page,
                "pair.html.j2",
                root="../../",
                script_src="'none'",
                comparison=comparison,
                pair=pair,
                left=by_run[pair.base_slug][item.question_id],
                right=by_run[pair.other_slug][item.question_id],
                left_page=item.page,
                right_page=item.other_page,
            )


def write_html_report(folders: Sequence[Path], out: Path) -> HtmlReport:
    """Write the report of `folders` into `out`; return what was written."""
    runs = load_run_views(folders)
    _prepare_out(out)
    pages = _PageWriter(environment())
    compared = comparisons(runs)
    pages.write(
        out / "index.html",
        "overview.html.j2",
        root="",
        script_src="'none'",
        runs=runs,
        benchmarks=_benchmark_groups(runs),
        comparisons=compared,
        generated=datetime.now(UTC).isoformat(timespec="seconds"),
    )
    script = _filter_script()
    written = {run.slug: _write_run(pages, out, run, script) for run in runs}
    by_run = {slug: {p.record.question_id: p for p in views} for slug, views in written.items()}
    for comparison in compared:
        _write_comparison(pages, out, comparison, by_run)
    return HtmlReport(
        out=out,
        index=out / "index.html",
        pages=len(pages.written),
        bytes=sum(p.stat().st_size for p in pages.written),
        question_pages=sum(len(views) for views in written.values()),
        comparisons=len(compared),
    )


def write_run_report(run_dir: Path, console: Console) -> None:
    """The report a finished run leaves in its folder (`run_folder.finish_run_folder` writes it last, for every door).
    The run is finished and saved by then: a report that cannot be written is a warning, never a failed evaluation."""
    from clearmed.core.sanitize import clean_text, redact_secrets

    try:
        report = write_html_report([run_dir], run_dir / "report")
    except Exception as err:  # any failure: the results are safe, say so and carry on
        message = redact_secrets(clean_text(f"{type(err).__name__}: {err}"))
        console.print(f"warning: HTML report not written ({' '.join(message.split())})", style="yellow", markup=False)
        return
    console.print(f"report: {report.index}", markup=False, highlight=False)
