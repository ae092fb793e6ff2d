"""The learned verifier on the HTML question page (issue 47): its choice, each answer's probability and features, or
why it fell back."""

from __future__ import annotations

from pathlib import Path

from clearmed.report.html_report import write_html_report
from clearmed.signatures.records import LearnedVerdict
from clearmed.signatures.records.settings import ProgramSettings
from clearmed.testing import QUESTION, build_toy_program, label_all, pathway_replies

from .conftest import write_run_folder


def _page(tmp_path: Path, verdicts: list[LearnedVerdict]) -> str:
    script = {**pathway_replies("A", "B", "C"), "source_quality": label_all("high")}
    settings = ProgramSettings(json_fallback=False, parallel_pathways="off", verifier_mode="heuristic")
    program, _, _ = build_toy_program(script, settings=settings)
    decision = program(question=QUESTION).decision
    outputs = [decision.verifier_outputs[0].model_copy(update={"learned": v}) for v in verdicts]
    run = write_run_folder(
        tmp_path / "run",
        [decision.model_copy(update={"verifier_outputs": outputs})],
        program="clear",
        benchmark="toy",
        source="toy",
        seconds=0.1,
    )
    write_html_report([run], tmp_path / "report")
    [page] = (tmp_path / "report").rglob("q/*.html")
    return page.read_text(encoding="utf-8")


def test_the_question_page_shows_the_learned_choice_with_each_answers_probability_and_features(tmp_path: Path) -> None:
    features = {
        "A": {"holds_parametric": 1.0, "holder_docs_lack": 0.0},
        "B": {"holds_parametric": 0.0, "holder_docs_lack": 1.0},
    }
    chosen = LearnedVerdict(choice="A", probabilities={"A": 0.64, "B": 0.36}, features=features)
    fell_back = LearnedVerdict(fallback="within_margin", note="A 0.52, B 0.48: within the margin 0.10 of a coin flip")
    html = _page(tmp_path, [chosen, fell_back])
    assert "<h3>Learned verifier: A</h3>" in html
    assert "<th>probability</th><td>0.64</td><td>0.36</td>" in html
    assert "<tr><td>holder docs lack</td><td>0</td><td>1</td></tr>" in html
    assert "<h3>Learned verifier: fell back (within margin)</h3>" in html
    assert "within the margin 0.10 of a coin flip" in html
