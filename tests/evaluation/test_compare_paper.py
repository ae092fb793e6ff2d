"""Comparisons ready for a paper (issue 50, item 7; issue 1's plot): one bar per run, labelled by the run; p-values
that never read 0; an interval on each paired difference; pairs against a chosen baseline or all pairs, with the
multiplicity stated and Holm's p; CSV, JSON and LaTeX files beside the Markdown; PDF or SVG plots; and one door,
`clearmed.compare_runs`, that `clearmed compare` and suites call."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest
from matplotlib.axes import Axes
from matplotlib.patches import Rectangle

from clearmed.config import parse_config
from clearmed.core.errors import UsageError
from clearmed.evaluation import EvalSpec, RunStore, run_evaluation, summarize
from clearmed.numbers.compare import compare, paired_comparisons
from clearmed.report.markdown import p_text, paired_markdown
from clearmed.report.plots import run_figures
from clearmed.signatures.records.settings import ProgramSettings
from clearmed.testing import QUESTION, build_toy_program, label_all, pathway_replies, verifier_reply

CONFIG = parse_config(
    {"backbones": {"main": {"kind": "openai_compatible", "model": "m", "api_base": "http://127.0.0.1:9/v1"}}},
    source="test.toml",
)
N = 10


def _run(run_dir: Path, right: int, *, benchmark: str = "toy") -> Path:
    """A finished run of the program "direct" (a toy that always answers A) on N questions; the first `right` have
    gold A, so it scores right/N and two runs share their first min(right) right answers."""
    questions = [
        QUESTION.model_copy(update={"id": f"q{i}", "gold_letters": ["A" if i < right else "B"]}) for i in range(N)
    ]
    built, _, _ = build_toy_program(
        {
            **pathway_replies("A", "A", "A"),
            "source_quality": label_all("high"),
            "verifier": verifier_reply("consensus"),
        },
        settings=ProgramSettings(json_fallback=False, parallel_pathways="off"),
    )
    spec = EvalSpec(program="direct", benchmark=benchmark, source="memory", questions=questions, run_dir=run_dir)
    records = run_evaluation(spec, CONFIG, built, show_progress=False)
    with RunStore(run_dir) as store:
        manifest = store.read_manifest()
        assert manifest is not None
        store.write_json("summary.json", summarize(records, manifest).model_dump_json())
    return run_dir


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Three runs of one program on one benchmark: 9, 6 and 3 of 10 right (the issue's case: a stronger and a
    weaker model under the same program), and one on another benchmark."""
    root = tmp_path_factory.mktemp("runs")
    return {
        "gpt4": _run(root / "gpt4" / "direct", 9),
        "gpt35": _run(root / "gpt35" / "direct", 6),
        "small": _run(root / "small" / "direct", 3),
        "other": _run(root / "other" / "direct", 5, benchmark="other-bench"),
    }


def _bars(ax: Axes) -> list[Rectangle]:
    return [patch for patch in ax.patches if isinstance(patch, Rectangle)]


def test_two_runs_of_one_program_draw_two_bars_each_labelled_by_its_run(runs: dict[str, Path]) -> None:
    comparison = compare([runs["gpt4"], runs["gpt35"]])
    labels = [run.label for run in comparison.runs]
    assert labels == ["gpt4/direct", "gpt35/direct"]
    figures = dict(run_figures([run.summary for run in comparison.runs], labels))
    (ax,) = figures["accuracy"].axes
    bars = _bars(ax)
    assert len(bars) == 2
    assert len({bar.get_x() for bar in bars}) == 2  # side by side, not stacked on one "direct / toy" bar
    assert [round(bar.get_height()) for bar in bars] == [90, 60]
    ticks = [tick.get_text() for tick in ax.get_xticklabels()]
    assert ticks == ["gpt4/direct\ntoy", "gpt35/direct\ntoy"]
    (routes_ax, *_) = figures["routes"].axes
    assert [tick.get_text() for tick in routes_ax.get_xticklabels()] == ticks


def test_six_runs_draw_six_bars(runs: dict[str, Path]) -> None:
    folders = [runs["gpt4"], runs["gpt35"], runs["small"]] * 2  # a suite's comparison of 6 cells, 3 programs × 2
    comparison = compare(folders)
    figures = dict(run_figures([run.summary for run in comparison.runs], [f"cell {i}" for i in range(6)]))
    assert len({bar.get_x() for bar in _bars(figures["accuracy"].axes[0])}) == 6


@pytest.mark.parametrize(
    ("p", "text"),
    [
        (1.0, "1.00"),  # the "1"
        (0.4545, "0.45"),
        (0.01, "0.01"),  # the boundary: two decimals from 0.01 up
        (0.0078, "0.008"),  # three below it
        (0.001, "0.001"),  # the boundary: three decimals from 0.001 up
        (0.00078, "7.8e-4"),  # scientific below, exponent unpadded
        (3.1e-31, "3.1e-31"),  # the "0"
        (0.0, "<1e-300"),  # a p that underflowed a double never reads 0
    ],
)
def test_p_values_print_as_a_paper_prints_them(p: float, text: str) -> None:
    assert p_text(p) == text


def test_a_lopsided_pair_prints_its_tiny_p_and_a_paired_interval() -> None:
    from clearmed.metrics import paired_comparison

    # 120 questions: the baseline right on 20, the other on those and 100 more (p = 2 / 2**100, about 1.6e-30).
    pair = paired_comparison(
        "base", {f"q{i}": i < 20 for i in range(120)}, "other", {f"q{i}": True for i in range(120)}
    )
    assert pair.mcnemar_p == pytest.approx(2 / 2**100, rel=1e-12)  # unrounded (rounded to 4 decimals it was 0)
    row = paired_markdown([pair]).splitlines()[-1]
    assert re.fullmatch(
        r"\| other \| base \| 120 \| 20 \| 100 \| 0 \| 0 \| \+83\.3 \[\+\d+\.\d, \+\d+\.\d\] \| 1\.6e-30 \|", row
    )


def test_baseline_pairs_every_run_against_it_and_all_pairs_pairs_all(runs: dict[str, Path]) -> None:
    three = [runs["gpt4"], runs["gpt35"], runs["small"]]
    first = compare(three)
    assert [(p.baseline, p.other) for p in first.pairs] == [
        ("gpt4/direct", "gpt35/direct"),
        ("gpt4/direct", "small/direct"),
    ]
    chosen = compare(three, baseline=runs["small"])
    assert (chosen.pairing, chosen.baseline) == ("baseline", "small/direct")
    assert [(p.baseline, p.other) for p in chosen.pairs] == [
        ("small/direct", "gpt4/direct"),
        ("small/direct", "gpt35/direct"),
    ]
    # gpt4 is right on q0-q8, small on q0-q2: six gained, none lost, +60 points
    assert [(p.gained, p.lost, p.difference) for p in chosen.pairs] == [(6, 0, 0.6), (3, 0, 0.3)]
    outside = compare(three[:2], baseline=runs["small"])  # a baseline not listed is compared first
    assert [run.label for run in outside.runs] == ["small/direct", "gpt4/direct", "gpt35/direct"]
    assert [p.baseline for p in outside.pairs] == ["small/direct"] * 2
    every = compare(three, all_pairs=True)
    assert every.pairing == "all"
    assert [(p.baseline, p.other) for p in every.pairs] == [
        ("gpt4/direct", "gpt35/direct"),
        ("gpt4/direct", "small/direct"),
        ("gpt35/direct", "small/direct"),
    ]
    assert every.multiplicity == 3


def test_several_pairs_carry_holm_p_and_the_output_states_the_multiplicity(runs: dict[str, Path]) -> None:
    from clearmed.metrics import holm_adjust
    from clearmed.report.markdown import comparison_markdown

    one = compare([runs["gpt4"], runs["small"]])
    assert [p.holm_p for p in one.pairs] == [None]
    text = comparison_markdown(one)
    assert "1 comparison." in text
    assert "Holm" not in text
    every = compare([runs["gpt4"], runs["gpt35"], runs["small"]], all_pairs=True)
    raw = [p.mcnemar_p for p in every.pairs]
    assert [p.holm_p for p in every.pairs] == holm_adjust(raw)
    text = comparison_markdown(every)
    assert "Every pair of runs of a benchmark paired (the earlier run as baseline)" in text
    assert "3 comparisons; the last column is Holm's adjustment of p over these 3" in text
    assert "| exact McNemar p | Holm p |" in text


def test_pairing_refusals_are_one_line(runs: dict[str, Path]) -> None:
    both = [runs["gpt4"], runs["gpt35"]]
    with pytest.raises(UsageError, match="not both"):
        compare(both, baseline=runs["gpt4"], all_pairs=True)
    with pytest.raises(UsageError, match="is on other-bench, gpt4/direct on toy: compare each benchmark apart"):
        compare(both, baseline=runs["other"])
    with pytest.raises(UsageError, match="--baseline nowhere is none of the runs compared"):
        paired_comparisons(compare(both).runs, baseline="nowhere")


def _tabulars(tex: str) -> list[tuple[int, list[str]]]:
    """Each tabular's column count and its rows (header included), checked to be well formed booktabs."""
    found = []
    for spec, body in re.findall(r"\\begin\{tabular\}\{(\w+)\}\n(.*?)\\end\{tabular\}", tex, flags=re.S):
        lines = body.splitlines()
        assert [lines[0], lines[2], lines[-1]] == ["\\toprule", "\\midrule", "\\bottomrule"]
        rows = [lines[1], *lines[3:-1]]
        assert all(row.endswith(r" \\") for row in rows)
        found.append((len(spec), rows))
    return found


def test_compare_runs_writes_markdown_csv_json_latex_and_plots(runs: dict[str, Path], tmp_path: Path) -> None:
    import clearmed

    out = tmp_path / "cmp"
    result = clearmed.compare_runs(
        [runs["gpt4"], runs["gpt35"], runs["small"]], out=out, baseline=runs["gpt35"], plot_format="svg"
    )
    names = sorted(path.name for path in result.files)
    tables = ["comparison.md", "runs.csv", "pairs.csv", "comparison.json", "comparison.tex"]
    assert names == sorted([*tables, "accuracy.svg", "routes.svg", "cost_by_route.svg"])
    assert (out / "comparison.md").read_text() == result.markdown
    assert (out / "accuracy.svg").read_text().lstrip().startswith("<?xml")
    with (out / "runs.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["run"], r["program"], float(r["accuracy"])) for r in rows] == [
        ("gpt4/direct", "direct", 0.9),
        ("gpt35/direct", "direct", 0.6),
        ("small/direct", "direct", 0.3),
    ]
    with (out / "pairs.csv").open() as handle:
        pairs = list(csv.DictReader(handle))
    assert [(p["run"], p["baseline"], int(p["gained"]), int(p["lost"])) for p in pairs] == [
        ("gpt4/direct", "gpt35/direct", 3, 0),
        ("small/direct", "gpt35/direct", 0, 3),
    ]
    assert (
        float(pairs[1]["difference_low"]) < float(pairs[1]["difference"]) == -0.3 < float(pairs[1]["difference_high"])
    )
    assert float(pairs[0]["holm_p"]) == 0.5  # both p = 0.25 (3 discordant of one sign), Holm doubles the smaller
    data = json.loads((out / "comparison.json").read_text())
    assert (data["pairing"], data["baseline"], data["comparisons"], data["p_adjustment"]) == (
        "baseline",
        "gpt35/direct",
        2,
        "holm",
    )
    assert data["runs"][0]["summary"]["program"] == "direct"
    tex = (out / "comparison.tex").read_text()
    assert "\\usepackage{booktabs}" in tex
    assert tex.count("\\begin{table}") == tex.count("\\end{table}") == 2
    (run_cols, run_rows), (pair_cols, pair_rows) = _tabulars(tex)
    assert all(row.count(" & ") == run_cols - 1 for row in run_rows)
    assert all(row.count(" & ") == pair_cols - 1 for row in pair_rows)
    assert len(run_rows) == 4
    assert len(pair_rows) == 3
    assert run_rows[1].startswith("gpt4/direct & direct & toy & 10 & 90.0 [")
    assert "Holm $p$" in pair_rows[0]
    assert "Paired against gpt35/direct" in tex


def test_latex_escapes_labels_and_pdf_plots_are_pdf(runs: dict[str, Path], tmp_path: Path) -> None:
    from clearmed.api.compare import compare_runs
    from clearmed.report.comparison_files import tex_escape

    assert tex_escape("gpt_4 & 50% #1") == r"gpt\_4 \& 50\% \#1"
    compare_runs([runs["gpt4"], runs["gpt35"]], out=tmp_path, plot_format="pdf")
    assert (tmp_path / "accuracy.pdf").read_bytes().startswith(b"%PDF")
    with pytest.raises(UsageError, match="--plot-format must be one of png, pdf, svg, not 'jpg'"):
        compare_runs([runs["gpt4"]], plot_format="jpg")  # type: ignore[arg-type]


def test_clearmed_compare_is_the_api_door(
    runs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import clearmed
    from clearmed.api import compare as api_compare
    from clearmed.cli.main import main

    assert "compare_runs" in clearmed.__all__
    assert clearmed.compare_runs is api_compare.compare_runs
    seen: list[tuple[object, dict[str, object]]] = []
    real = api_compare.compare_runs

    def spy(folders: object, **options: object) -> object:
        seen.append((folders, options))
        return real(folders, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(api_compare, "compare_runs", spy)
    argv = ["compare", str(runs["gpt4"]), str(runs["small"]), "--baseline", str(runs["small"])]
    assert main([*argv, "--out", str(tmp_path), "--plot-format", "pdf"]) == 0
    assert seen == [
        (
            [str(runs["gpt4"]), str(runs["small"])],
            {
                "out": str(tmp_path),
                "common": False,
                "baseline": str(runs["small"]),
                "all_pairs": False,
                "plot_format": "pdf",
            },
        )
    ]
    shown = capsys.readouterr().out
    assert "Paired against small/direct, on the questions both scored: 1 comparison." in shown
    assert "| gpt4/direct | small/direct | 10 | 3 | 6 | 0 | 1 | +60.0 [" in shown
    assert (tmp_path / "accuracy.pdf").is_file()
    with pytest.raises(SystemExit) as refused:  # argparse: --baseline and --all-pairs exclude each other
        main([*argv, "--all-pairs"])
    assert refused.value.code == 2
    assert "not allowed with argument --baseline" in capsys.readouterr().err
