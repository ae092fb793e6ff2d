"""The report's plots as data URIs, so every page stays one self-contained file that opens from disk.

Accuracy, route mix and cost by route are the run folder's own plots (`evaluation.summary.write_plots`), rendered into a
scratch folder and inlined; the deciding rules and the per-pathway accuracy against the oracle are drawn here.
"""

from __future__ import annotations

import base64
import io
import tempfile
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from clearmed.evaluation.summary import RunSummary, write_plots

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def _figure_uri(fig: Figure) -> str:
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    plt.close(fig)
    return _uri(buffer.getvalue())


def run_plots(summaries: Sequence[RunSummary], labels: Sequence[str]) -> dict[str, str]:
    """Plot name -> data URI: accuracy, routes, cost_by_route, rules and (CLEAR runs) pathways."""
    import matplotlib

    matplotlib.use("Agg")
    # write_plots labels bars by program and benchmark; two runs of one program would share a bar, so the
    # run labels stand in for the program names.
    # Long labels are wrapped (at their hyphens) so that neighbouring bars' labels do not run into each other.
    relabelled = [
        s.model_copy(update={"program": textwrap.fill(label, 14)}) for s, label in zip(summaries, labels, strict=True)
    ]
    plots: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="clearmed-plots-") as scratch:
        for path in write_plots(relabelled, Path(scratch)):
            plots[path.stem] = _uri(path.read_bytes())
    plots["rules"] = _rules_plot(summaries, labels)
    pathways = _pathways_plot(summaries, labels)
    if pathways is not None:
        plots["pathways"] = pathways
    return plots


def _rules_plot(summaries: Sequence[RunSummary], labels: Sequence[str]) -> str:
    import matplotlib.pyplot as plt

    rules = sorted({rule for s in summaries for rule in s.rule_counts})
    fig, ax = plt.subplots(figsize=(5.5, 0.9 + 0.3 * len(rules) * max(1, len(summaries)) ** 0.5))
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
    return _figure_uri(fig)


def _pathways_plot(summaries: Sequence[RunSummary], labels: Sequence[str]) -> str | None:
    """Each pathway alone, the deterministic verifier, the program and the oracle (some pathway right)."""
    import matplotlib.pyplot as plt

    rows = [(s, label) for s, label in zip(summaries, labels, strict=True) if s.pathways is not None]
    if not rows:
        return None
    bars = ["parametric", "local", "dynamic", "deterministic\nverifier", "program", "oracle"]
    fig, ax = plt.subplots(figsize=(5.5, 3.4))
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
    return _figure_uri(fig)
