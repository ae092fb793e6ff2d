"""Every plot of a run's numbers, drawn by one renderer (matplotlib, Agg): the PNGs of a run folder and the plots
of `clearmed compare --out`, PNG, PDF or SVG (`write_plots`: accuracy with intervals, route mix, cost by route, and
the pathways' reliability when they were calibrated; one bar per run, labelled by run), and the HTML report's plots
as data URIs (`run_plots`: the same figures, and the deciding rules and each pathway against the oracle), so every
page stays one self-contained file that opens from disk."""

from __future__ import annotations

import base64
import io
import textwrap
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from clearmed.evaluation.summary import RunSummary

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

# The run folder's PNGs are drawn at 120 dpi, and the report inlines those very bytes; its own two plots at 100.
_RUN_DPI = 120
_REPORT_DPI = 100


def _agg() -> None:
    import matplotlib

    matplotlib.use("Agg")


PlotFormat = Literal["png", "pdf", "svg"]


def _render(fig: Figure, dpi: int, fmt: PlotFormat = "png") -> bytes:
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.savefig(buffer, format=fmt, dpi=dpi)
    plt.close(fig)
    return buffer.getvalue()


def _uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def run_figures(summaries: Sequence[RunSummary], labels: Sequence[str] | None = None) -> Iterator[tuple[str, Figure]]:
    """Plot name -> figure, one at a time (each is saved and closed before the next is drawn): accuracy, routes,
    cost_by_route, and calibration when some run's pathways were calibrated. One bar (or group) per run, at its own
    position, named by its label (default: its program) over its benchmark, so two runs of one program never share
    a bar. Long labels are wrapped (at their hyphens) so that neighbouring bars' labels do not run into each other."""
    _agg()
    given = list(labels) if labels is not None else [s.program for s in summaries]
    if len(given) != len(summaries):
        raise ValueError("one label per summary")
    names = [f"{textwrap.fill(label, 14)}\n{s.benchmark}" for label, s in zip(given, summaries, strict=True)]
    routes = sorted({route for s in summaries for route in s.route_counts})
    yield "accuracy", _accuracy_plot(summaries, names)
    yield "routes", _route_mix_plot(summaries, names, routes)
    yield "cost_by_route", _route_cost_plot(summaries, names, routes)
    calibrated = [(s, name) for s, name in zip(summaries, names, strict=True) if s.pathways and s.pathways.calibration]
    if calibrated:
        yield "calibration", _reliability_plot(calibrated)


def write_plots(
    summaries: Sequence[RunSummary],
    folder: Path,
    stem: str = "",
    *,
    labels: Sequence[str] | None = None,
    fmt: PlotFormat = "png",
) -> list[Path]:
    """Plots as files (PNG, or PDF or SVG for a paper): accuracy with intervals by run; route mix; cost per question
    by route; calibration. `labels` name the runs (`run_figures`)."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, fig in run_figures(summaries, labels):
        path = folder / f"{stem}{name}.{fmt}"
        path.write_bytes(_render(fig, _RUN_DPI, fmt))
        written.append(path)
    return written


def run_plots(summaries: Sequence[RunSummary], labels: Sequence[str]) -> dict[str, str]:
    """Plot name -> data URI: the run folder's plots (accuracy, routes, cost_by_route, calibration), rules and (CLEAR
    runs) pathways."""
    plots = {name: _uri(_render(fig, _RUN_DPI)) for name, fig in run_figures(summaries, labels)}
    plots["rules"] = _uri(_render(_rules_plot(summaries, labels), _REPORT_DPI))
    pathways = _pathways_plot(summaries, labels)
    if pathways is not None:
        plots["pathways"] = _uri(_render(pathways, _REPORT_DPI))
    return plots


def _axes(figsize: tuple[float, float]) -> tuple[Figure, Axes]:
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=figsize)


def _accuracy_plot(summaries: Sequence[RunSummary], labels: Sequence[str]) -> Figure:
    fig, ax = _axes((max(4, 1.6 * len(summaries)), 3.6))
    values, lows, highs = [], [], []
    for s in summaries:
        acc = s.accuracy
        value = acc.accuracy if acc and acc.accuracy is not None else 0.0
        low = acc.wilson.low if acc and acc.wilson else value
        high = acc.wilson.high if acc and acc.wilson else value
        values.append(100 * value)
        lows.append(100 * (value - low))
        highs.append(100 * (high - value))
    benchmarks = list(dict.fromkeys(s.benchmark for s in summaries))
    # Runs that span benchmarks are coloured by benchmark (one legend entry each); one benchmark is one colour.
    palette = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860"]
    colours = [palette[benchmarks.index(s.benchmark) % len(palette)] for s in summaries]
    positions = range(len(summaries))
    bars = ax.bar(positions, values, yerr=[lows, highs], capsize=4, color=colours)
    ax.set_xticks(positions, labels)
    if len(benchmarks) > 1:
        first = [bars[[s.benchmark for s in summaries].index(b)] for b in benchmarks]
        ax.legend(first, benchmarks, fontsize=7)
    ax.set_ylabel("accuracy % (95% Wilson)")
    ax.set_ylim(0, 100)
    ax.set_title("Accuracy by run")
    fig.tight_layout()
    return fig


def _route_mix_plot(summaries: Sequence[RunSummary], labels: Sequence[str], routes: list[str]) -> Figure:
    fig, ax = _axes((max(4, 1.6 * len(summaries)), 3.6))
    bottom = [0.0] * len(summaries)
    positions = range(len(summaries))
    for route in routes:
        shares = [s.route_counts.get(route, 0) / max(1, s.evaluated) * 100 for s in summaries]
        ax.bar(positions, shares, bottom=bottom, label=route)
        bottom = [b + v for b, v in zip(bottom, shares, strict=True)]
    ax.set_xticks(positions, labels)
    ax.set_ylabel("% of questions")
    ax.set_title("Route mix")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1, 1))
    fig.tight_layout()
    return fig


def _route_cost_plot(summaries: Sequence[RunSummary], labels: Sequence[str], routes: list[str]) -> Figure:
    fig, ax = _axes((max(4, 1.6 * len(summaries)), 3.6))
    width = 0.8 / max(1, len(routes))
    for offset, route in enumerate(routes):
        seconds = [next((c.mean_seconds for c in s.cost_by_route if c.route == route), 0.0) for s in summaries]
        positions = [i + offset * width for i in range(len(summaries))]
        ax.bar(positions, seconds, width=width, label=route)
    ax.set_xticks([i + width * (len(routes) - 1) / 2 for i in range(len(summaries))], labels)
    ax.set_ylabel("mean seconds per question")
    ax.set_title("Cost per question by route")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1, 1))
    fig.tight_layout()
    return fig


def _reliability_plot(calibrated: Sequence[tuple[RunSummary, str]]) -> Figure:
    """A reliability diagram: one line per pathway (and run), the diagonal is perfect calibration."""
    fig, ax = _axes((4.6, 4.2))
    ax.plot([0, 1], [0, 1], color="#999999", linestyle="--", linewidth=1)
    for s, label in calibrated:
        assert s.pathways is not None
        for pathway, cal in s.pathways.calibration.items():
            name = pathway if len(calibrated) == 1 else f"{label} {pathway}"
            xs = [b.mean_confidence for b in cal.bins]
            ys = [b.accuracy for b in cal.bins]
            ax.plot(xs, ys, marker="o", label=f"{name} (ECE {cal.ece:.3f})")
    ax.set_xlabel("confidence (top option probability)")
    ax.set_ylabel("accuracy")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_title("Reliability of pathway confidences")
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    return fig


def _rules_plot(summaries: Sequence[RunSummary], labels: Sequence[str]) -> Figure:
    rules = sorted({rule for s in summaries for rule in s.rule_counts})
    fig, ax = _axes((5.5, 0.9 + 0.3 * len(rules) * max(1, len(summaries)) ** 0.5))
    height = 0.8 / max(1, len(summaries))
    for offset, (summary, label) in enumerate(zip(summaries, labels, strict=True)):
        counts = [summary.rule_counts.get(rule, 0) for rule in rules]
        ax.barh([i + offset * height for i in range(len(rules))], counts, height=height, label=label)
    ax.set_yticks([i + height * (len(summaries) - 1) / 2 for i in range(len(rules))], rules, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("questions")
    ax.set_title("Deciding rule")
    if len(summaries) > 1:
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def _pathways_plot(summaries: Sequence[RunSummary], labels: Sequence[str]) -> Figure | None:
    """Each pathway alone, the deterministic verifier, the program and the oracle (some pathway right)."""
    rows = [(s, label) for s, label in zip(summaries, labels, strict=True) if s.pathways is not None]
    if not rows:
        return None
    bars = ["parametric", "local", "dynamic", "deterministic\nverifier", "program", "oracle"]
    fig, ax = _axes((5.5, 3.4))
    width = 0.8 / len(rows)
    for offset, (summary, label) in enumerate(rows):
        worth = summary.pathways
        assert worth is not None
        acc = summary.accuracy.accuracy if summary.accuracy and summary.accuracy.accuracy is not None else 0.0
        values = [
            # a pathway left out by choice has no bar (NaN draws none), not a 0% one
            *(worth.pathway_accuracy.get(p, float("nan")) for p in ("parametric", "local", "dynamic")),
            worth.deterministic_verifier_accuracy,
            acc,
            worth.any_pathway_correct,
        ]
        ax.bar([i + offset * width for i in range(len(bars))], [100 * v for v in values], width=width, label=label)
    ax.set_xticks([i + width * (len(rows) - 1) / 2 for i in range(len(bars))], bars, fontsize=8)
    ax.set_ylim(0, 100)
    ax.set_ylabel("accuracy %")
    ax.set_title("Each pathway alone, and the oracle (some pathway right)", fontsize=10)
    if len(rows) > 1:
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig
