"""The files of `clearmed compare --out`, for a paper as well as a reader: comparison.md (`report.markdown`), the
numbers as runs.csv and pairs.csv (one row per run, one per paired comparison), comparison.json (both, with how the
runs were paired and how many comparisons there are), comparison.tex (both tables, LaTeX with booktabs rules), and
the plots (`report.plots`) as PNG, PDF or SVG.

The CSV and JSON files carry the numbers unrounded (accuracy as a fraction, p as a float); the Markdown and LaTeX
tables print them as `report.markdown` does (percent with one decimal, p by `p_text`)."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

from clearmed.metrics import PairedComparison
from clearmed.numbers.compare import Comparison
from clearmed.report.markdown import comparison_markdown, difference_text, p_text, pairing_text
from clearmed.report.plots import PlotFormat, write_plots

RUN_COLUMNS = [
    "run", "folder", "program", "benchmark", "model", "config", "overrides", "seed", "evaluated", "planned",
    "accuracy", "accuracy_low", "accuracy_high", "degraded", "clean_accuracy", "gate_failures", "mean_seconds",
    "mean_lm_calls", "mean_usd",
]  # fmt: skip
PAIR_COLUMNS = [
    "run", "baseline", "shared", "both_right", "gained", "lost", "both_wrong", "difference", "difference_low",
    "difference_high", "mcnemar_p", "holm_p",
]  # fmt: skip


def write_comparison(comparison: Comparison, out: Path, plot_format: PlotFormat = "png") -> list[Path]:
    """Every file of the comparison into `out` (made if missing); the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    files = {
        "comparison.md": comparison_markdown(comparison),
        "comparison.json": json.dumps(comparison_json(comparison), indent=2) + "\n",
        "comparison.tex": comparison_latex(comparison),
    }
    written = []
    for name, text in files.items():
        (out / name).write_text(text, encoding="utf-8")
        written.append(out / name)
    written += _write_csv(out / "runs.csv", RUN_COLUMNS, run_rows(comparison))
    written += _write_csv(out / "pairs.csv", PAIR_COLUMNS, [pair_row(pair) for pair in comparison.pairs])
    labels = [run.label for run in comparison.runs]
    return written + write_plots([run.summary for run in comparison.runs], out, labels=labels, fmt=plot_format)


def _write_csv(path: Path, columns: list[str], rows: list[dict[str, object]]) -> list[Path]:
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    return [path]


def run_rows(comparison: Comparison) -> list[dict[str, object]]:
    """One row per run: its label and folder, what produced it (the model that answered, the config, its `--set`
    overrides, the seed), accuracy with its Wilson interval, degraded questions and failed gates, cost."""
    rows: list[dict[str, object]] = []
    for run in comparison.runs:
        s = run.summary
        acc, clean = s.accuracy, s.clean_accuracy
        rows.append(
            {
                "run": run.label,
                "folder": run.folder,
                "program": s.program,
                "benchmark": s.benchmark,
                "model": run.model,
                "config": run.config,
                "overrides": run.overrides,
                "seed": run.seed,
                "evaluated": s.evaluated,
                "planned": s.planned,
                "accuracy": acc.accuracy if acc else None,
                "accuracy_low": acc.wilson.low if acc and acc.wilson else None,
                "accuracy_high": acc.wilson.high if acc and acc.wilson else None,
                "degraded": s.degraded,
                "clean_accuracy": clean.accuracy if clean else None,
                "gate_failures": sum(s.gate_failures.values()),
                "mean_seconds": s.cost.mean_seconds,
                "mean_lm_calls": s.cost.mean_lm_calls,
                "mean_usd": s.spend.mean_usd if s.spend else None,
            }
        )
    return rows


def pair_row(pair: PairedComparison) -> dict[str, object]:
    """One paired comparison: counts, run - baseline accuracy with its Newcombe interval, McNemar and Holm p."""
    ci = pair.difference_ci
    return {
        "run": pair.other,
        "baseline": pair.baseline,
        "shared": pair.common,
        "both_right": pair.both_right,
        "gained": pair.gained,
        "lost": pair.lost,
        "both_wrong": pair.both_wrong,
        "difference": pair.difference,
        "difference_low": ci.low if ci else None,
        "difference_high": ci.high if ci else None,
        "mcnemar_p": pair.mcnemar_p,
        "holm_p": pair.holm_p,
    }


def comparison_json(comparison: Comparison) -> dict[str, object]:
    """The comparison as JSON: how it paired, how many comparisons, the runs' rows with their summaries, the pairs."""
    return {
        "pairing": comparison.pairing,
        "baseline": comparison.baseline,
        "comparisons": comparison.multiplicity,
        "p_adjustment": "holm" if comparison.multiplicity > 1 else None,
        "difference_interval": "newcombe-paired (Newcombe 1998, method 10), 95%",
        "common": comparison.common,
        "runs": [
            {**row, "summary": run.summary.model_dump(mode="json")}
            for row, run in zip(run_rows(comparison), comparison.runs, strict=True)
        ],
        "pairs": [pair_row(pair) for pair in comparison.pairs],
    }


_TEX_SPECIAL = re.compile(r"([&%$#_{}~^\\])")
_TEX_REPLACEMENT = {"~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "\\": r"\textbackslash{}"}


def tex_escape(text: str) -> str:
    """Text as LaTeX prints it literally (run labels hold _ and the like)."""
    return _TEX_SPECIAL.sub(lambda m: _TEX_REPLACEMENT.get(m.group(1), "\\" + m.group(1)), text)


def _tex_p(p: float) -> str:
    """`p_text` in math mode: 3.1e-31 as $3.1 \\times 10^{-31}$."""
    text = p_text(p)
    if "e" not in text:
        return f"${text}$"
    mantissa, exponent = text.lstrip("<").split("e")
    return f"${'<' if text.startswith('<') else ''}{mantissa} \\times 10^{{{exponent}}}$"


def _tabular(columns: str, head: list[str], rows: list[list[str]]) -> list[str]:
    return [
        f"\\begin{{tabular}}{{{columns}}}",
        "\\toprule",
        " & ".join(head) + r" \\",
        "\\midrule",
        *(" & ".join(row) + r" \\" for row in rows),
        "\\bottomrule",
        "\\end{tabular}",
    ]


def comparison_latex(comparison: Comparison) -> str:
    """Two tables (needs \\usepackage{booktabs}): the runs' accuracy with 95% Wilson intervals, and the paired
    comparisons (run - baseline in percentage points with Newcombe's paired 95% interval, exact McNemar p, and the
    Holm-adjusted p when there are several), captioned with how the runs were paired and how many comparisons."""
    runs = []
    for row in run_rows(comparison):
        acc, low, high = row["accuracy"], row["accuracy_low"], row["accuracy_high"]
        cell = "--" if not isinstance(acc, float) else f"{100 * acc:.1f}"
        if isinstance(low, float) and isinstance(high, float):
            cell += f" [{100 * low:.1f}, {100 * high:.1f}]"
        runs.append(
            [tex_escape(str(row[key])) for key in ("run", "program", "benchmark")] + [f"{row['evaluated']}", cell]
        )
    lines = [
        "% clearmed compare: needs \\usepackage{booktabs}",
        "\\begin{table}[t]",
        "\\centering",
        *_tabular("lllrl", ["Run", "Program", "Benchmark", "$n$", r"Accuracy \% [95\% CI]"], runs),
        "\\caption{Accuracy over every question (degraded ones counted wrong), with 95\\% Wilson intervals.}",
        "\\end{table}",
    ]
    if comparison.pairs:
        holm = comparison.multiplicity > 1
        head = ["Run", "Baseline", "$n$", "Gained", "Lost", r"$\Delta$ pp [95\% CI]", "McNemar $p$"]
        pairs = [
            [tex_escape(p.other), tex_escape(p.baseline), str(p.common), str(p.gained), str(p.lost)]
            + [tex_escape(difference_text(p)).replace("-", "$-$"), _tex_p(p.mcnemar_p)]
            + ([_tex_p(p.holm_p) if p.holm_p is not None else "--"] if holm else [])
            for p in comparison.pairs
        ]
        lines += [
            "",
            "\\begin{table}[t]",
            "\\centering",
            *_tabular("llrrrlr" + ("r" if holm else ""), head + (["Holm $p$"] if holm else []), pairs),
            f"\\caption{{{tex_escape(pairing_text(comparison))} $\\Delta$: the run's accuracy minus the baseline's, "
            "with Newcombe's paired 95\\% interval; $p$: exact McNemar.}",
            "\\end{table}",
        ]
    return "\n".join(lines) + "\n"
