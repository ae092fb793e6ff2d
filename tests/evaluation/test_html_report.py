"""The HTML report: every question has its page, every link resolves, hostile evidence stays text, and the
comparison lists are the questions behind the paired counts."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from clearmed.api import assemble
from clearmed.cli.main import main
from clearmed.evaluation import read_records
from clearmed.evaluation.store import RunStore
from clearmed.evaluation.summary import summarize
from clearmed.numbers.compare import ComparedRun, _correct, paired_comparisons
from clearmed.report.html_report import environment, load_run_views, write_html_report
from clearmed.report.html_views import QuestionPage, candidate_view, page_name, question_page
from clearmed.signatures.records import Candidate, VerifierVerdict
from clearmed.testing import label_all, scripted_lm, verifier_reply

from .conftest import write_run_folder


class Page(HTMLParser):
    """The links, ids, scripts and event-handler attributes of one HTML file."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.links: list[str] = []
        self.ids: set[str] = set()
        self.scripts = 0
        self.handlers: list[str] = []
        self.feed(path.read_text(encoding="utf-8"))

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "script":
            self.scripts += 1
        for name in ("href", "src"):
            if values.get(name):
                self.links.append(values[name] or "")
        if values.get("id"):
            self.ids.add(values["id"] or "")
        self.handlers += [name for name, _ in attrs if name.startswith("on")]


def render_question_page(page: QuestionPage, run_dir: Path) -> str:
    """One question page as the report writes it, for a page view built in the test."""
    return (
        environment()
        .get_template("question.html.j2")
        .render(
            version="test",
            root="../../../",
            script_src="'none'",
            run=load_run_views([run_dir])[0],
            page=page,
            previous="",
            next="",
        )
    )


def pages(report: Path) -> list[Path]:
    return sorted(report.rglob("*.html"))


def test_every_question_has_a_page_and_every_link_resolves(report_dir: Path, report_runs: dict[str, Path]) -> None:
    for name, slug in (("paper", "paper"), ("strict", "strict"), ("hostile", "hostile")):
        records = list(read_records(report_runs[name]))
        assert records
        for record in records:
            assert (report_dir / "runs" / slug / "q" / page_name(record.index, record.question_id)).is_file()
        listing = (report_dir / "runs" / slug / "index.html").read_text(encoding="utf-8")
        assert listing.count('<tr class="') == len(records)  # one row per question
    broken = []
    parsed = {path: Page(path) for path in pages(report_dir)}
    for path, page in parsed.items():
        for link in page.links:
            parts = urlsplit(link)
            if parts.scheme == "data":
                continue
            assert parts.scheme in ("", "https", "http"), f"{path}: {link}"
            if parts.scheme:
                continue  # provenance links to the web
            target = path if not parts.path else (path.parent / unquote(parts.path)).resolve()
            if not target.is_file():
                broken.append(f"{path.relative_to(report_dir)} -> {link}")
            elif parts.fragment and target.suffix == ".html" and "=" not in parts.fragment:
                target_page = parsed.get(target) or Page(target)
                if unquote(parts.fragment) not in target_page.ids:
                    broken.append(f"{path.relative_to(report_dir)} -> {link} (no such id)")
    assert broken == []
    # Self-contained: every image inlined, nothing fetched from anywhere.
    for path, page in parsed.items():
        assert all(not link.startswith("//") for link in page.links), path
        text = path.read_text(encoding="utf-8")
        assert "<link " not in text, path
        assert "@import" not in text, path


def test_a_question_page_shows_the_whole_trail(report_dir: Path, report_runs: dict[str, Path]) -> None:
    record = next(r for r in read_records(report_runs["paper"]) if r.decision.bundle.followups and r.decision.steps)
    html = (report_dir / "runs" / "paper" / "q" / page_name(record.index, record.question_id)).read_text()
    decision = record.decision
    for heading in ("Question", "Pathways", "Evidence", "Verifier", "Follow-up searches", "Adjudication trail", "Cost"):
        assert f"<h2>{heading}</h2>" in html, heading
    for text in decision.bundle.question.options.values():  # type: ignore[union-attr]
        assert text in html
    assert decision.deciding_rule
    assert f"<code>{decision.deciding_rule}</code>" in html
    assert html.count('<tr class="step') == len(decision.steps)
    for passage in [*decision.bundle.local_passages, *decision.bundle.all_dynamic_passages()]:
        assert f'id="passage-{passage.id}"' in html
    assert "toy-textbook:book-" in html  # corpus provenance
    assert 'href="https://www.' in html  # web provenance, linked
    assert "cited by" in html


def test_hostile_evidence_renders_as_text(report_dir: Path, report_runs: dict[str, Path]) -> None:
    records = list(read_records(report_runs["hostile"]))
    planted = records[-1]  # HTML in the question, rationales, a page's title, text and address
    html = (report_dir / "runs" / "hostile" / "q" / page_name(planted.index, planted.question_id)).read_text()
    assert "<script>document.body" not in html
    assert "&lt;script&gt;document.body.setAttribute(" in html  # shown, as text
    assert "<img src=x" not in html
    assert "&lt;img src=x onerror=" in html
    assert "&lt;b&gt;Bold?&lt;/b&gt;" in html
    page = Page(report_dir / "runs" / "hostile" / "q" / page_name(planted.index, planted.question_id))
    assert page.scripts == 0
    assert page.handlers == []
    assert not any(link.lower().startswith("javascript") for link in page.links)  # the planted address is text
    assert "javascript:document.body.setAttribute(&#39;data-pwned&#39;,&#39;link&#39;)" in html
    # Defence in depth: no page may run a script but the list's own filter (by hash).
    for path in pages(report_dir):
        parsed = Page(path)
        assert parsed.handlers == [], path
        assert parsed.scripts == (1 if path.name == "index.html" and path.parent.parent.name == "runs" else 0), path
        assert "script-src 'sha256-" in path.read_text() or "script-src 'none'" in path.read_text()
    # The reliability suite's attacks: the pages are kept, marked quarantined, and their text shown escaped.
    first = (report_dir / "runs" / "hostile" / "q" / page_name(records[0].index, records[0].question_id)).read_text()
    assert "badge quarantine" in first
    assert "withheld from every prompt" in first


def test_the_comparison_lists_the_gained_and_lost_questions(report_dir: Path, report_runs: dict[str, Path]) -> None:
    paper, strict = list(read_records(report_runs["paper"])), list(read_records(report_runs["strict"]))
    base, other = _correct(paper), _correct(strict)
    gained = sorted(q for q in base if other[q] and not base[q])
    lost = sorted(q for q in base if base[q] and not other[q])
    assert gained
    assert lost
    html = (report_dir / "compare" / "synthetic.html").read_text()
    sections = {
        kind: re.search(rf'<h3 id="paper--vs--strict-{kind}">.*?(?=<h3|</main>)', html, re.DOTALL)
        for kind in ("gained", "lost")
    }
    for kind, expected in (("gained", gained), ("lost", lost)):
        section = sections[kind]
        assert section is not None, kind
        assert sorted(re.findall(r"<strong>(synth-\d+)</strong>", section.group(0))) == expected
        for qid in expected:
            index = next(r.index for r in paper if r.question_id == qid)
            name = page_name(index, qid)
            assert (report_dir / "compare" / "paper--vs--strict" / name).is_file()
            side = (report_dir / "compare" / "paper--vs--strict" / name).read_text()
            assert side.count("<h2>Adjudication trail</h2>") == 2  # both trails, side by side
            assert f'href="../runs/paper/q/{name}"' in section.group(0)
            assert f'href="../runs/strict/q/{name}"' in section.group(0)
    # The counts are compare.py's paired test, not a second implementation.
    manifest = RunStore(report_runs["paper"]).read_manifest()
    assert manifest is not None
    runs = [
        ComparedRun(label=label, folder="", summary=summarize(records, manifest), correct=_correct(records))
        for label, records in (("paper", paper), ("strict", strict))
    ]
    (pair,) = paired_comparisons(runs)
    assert (pair.gained, pair.lost) == (len(gained), len(lost))
    assert f"{pair.mcnemar_p:.3g}" in html
    assert "adversarial:" not in (report_dir / "index.html").read_text()  # one run of a benchmark: no comparison


def test_option_probabilities_are_shown_when_a_candidate_records_them(report_runs: dict[str, Path]) -> None:
    record = next(iter(read_records(report_runs["paper"])))
    decision = record.decision
    candidate = decision.bundle.candidates[0]
    assert candidate_view(candidate, decision).distribution == []  # absent: nothing to show, nothing fails

    class ScoredCandidate(Candidate):  # a later Candidate with per-option probabilities, whatever its field name
        option_scores: dict[str, object] | None = None

    scored = ScoredCandidate(
        **candidate.model_dump(exclude={"option_scores"}),
        option_scores={"method": "next_token", "probabilities": {"A": 0.7, "B": 0.2, "C": 0.05, "D": 0.05}},
    )
    view = candidate_view(scored, decision)
    assert view.distribution == [("A", 0.7), ("B", 0.2), ("C", 0.05), ("D", 0.05)]
    assert "option_scores" in view.extras
    # On the page: a probability column in the options table, and the distribution in the pathway's card.
    bundle = decision.bundle.model_copy(update={"candidates": [scored, *decision.bundle.candidates[1:]]})
    page = question_page(record.model_copy(update={"decision": decision.model_copy(update={"bundle": bundle})}), None)
    assert [o.probabilities for o in page.options][:2] == [{scored.pathway: 0.7}, {scored.pathway: 0.2}]
    html = render_question_page(page, report_runs["paper"])
    assert f"P({scored.pathway})</th>" in html
    assert '<td class="num">0.70</td>' in html
    assert '<table class="distribution small">' in html


def test_report_command_and_its_errors(
    report_runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r"
    assert main(["report", str(report_runs["paper"]), str(report_runs["strict"]), "--out", str(out)]) == 0
    assert "32 question pages, comparison views 1;" in capsys.readouterr().err
    assert (out / "compare" / "synthetic.html").is_file()
    # Rewriting drops the pages of runs no longer in the report.
    assert main(["report", str(report_runs["paper"]), "--out", str(out)]) == 0
    capsys.readouterr()
    assert not (out / "runs" / "strict").exists()
    assert not (out / "compare").exists()
    for argv, message in (
        (["report", str(report_runs["paper"]), str(report_runs["paper"]), "--out", str(out)], "given twice"),
        (["report", str(tmp_path), "--out", str(out)], "no manifest.json"),
        (["report", str(report_runs["paper"]), "--out", str(report_runs["strict"])], "holds no clearmed report"),
        (["report", str(report_runs["paper"]), str(report_runs["strict"])], "need --out"),
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("clearmed: error:"), err
        assert message in err, err
        assert "Traceback" not in err


@pytest.fixture
def scripted_eval(monkeypatch: pytest.MonkeyPatch) -> None:
    def answer(call):  # type: ignore[no-untyped-def]
        return {"rationale": "because", **({"cited_ids": []} if "evidence" in call.user else {}), "answer": "A"}

    lm, _ = scripted_lm(
        {
            "parametric": answer,
            "local_answer": answer,
            "dynamic_answer": answer,
            "source_quality": label_all("high"),
            "verifier": verifier_reply("consensus"),
        }
    )
    monkeypatch.setattr(assemble, "build_role_lms", lambda config, roles=("main", "assessor"): {"main": lm})


def test_eval_writes_a_report_and_a_failed_report_is_only_a_warning(
    scripted_eval: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    assert main(["eval", "--benchmark", "demo", "--limit", "2", "--run-dir", str(run_dir)]) == 0
    assert (run_dir / "report" / "index.html").is_file()
    assert len(list((run_dir / "report" / "runs").glob("*/q/*.html"))) == 2
    capsys.readouterr()

    def broken(*args: object, **kwargs: object) -> None:
        raise OSError("disk full")

    from clearmed.report import html_report

    monkeypatch.setattr(html_report, "write_html_report", broken)
    assert main(["eval", "--benchmark", "demo", "--limit", "3", "--run-dir", str(tmp_path / "run2")]) == 0
    err = capsys.readouterr().err
    assert "warning: HTML report not written (OSError: disk full)" in err
    assert len((tmp_path / "run2" / "results.jsonl").read_text().splitlines()) == 3  # the run itself is complete
    assert (tmp_path / "run2" / "summary.json").is_file()


def test_a_run_without_results_still_reports(tmp_path: Path, report_runs: dict[str, Path]) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "manifest.json").write_text((report_runs["paper"] / "manifest.json").read_text())
    report = write_html_report([empty], tmp_path / "out")
    assert report.question_pages == 0
    assert report.index.is_file()


def test_failed_unparsed_and_free_text_questions_have_pages(tmp_path: Path) -> None:
    from clearmed.evaluation.runner import crashed_decision
    from clearmed.signatures.records import (
        AdjudicationStep,
        Answer,
        Decision,
        EvidenceBundle,
        Question,
        StepError,
    )
    from clearmed.testing import QUESTION

    free = Question(id="free-1", text="What replaces the missing hormone?", answer_mode="free_text", gold_text="T4")
    decisions = [
        crashed_decision(QUESTION.model_copy(update={"id": "crash-1"}), "direct", RuntimeError("boom")),
        Decision(
            question_id="unparsed-1",
            status="unparsed",
            bundle=EvidenceBundle(
                question=QUESTION.model_copy(update={"id": "unparsed-1"}),
                candidates=[
                    Candidate(
                        pathway="parametric",
                        raw_answer="<i>maybe</i>",
                        error=StepError(stage="parametric", kind="parse_error", message="no option letter"),
                    )
                ],
            ),
            steps=[AdjudicationStep(mechanism="format_gate", rule="format_gate", outcome="no valid option set")],
            program="direct",
        ),
        Decision(
            question_id="free-1",
            status="answered",
            answer=Answer.of_text("Levothyroxine"),
            deciding_rule="single_pathway",
            bundle=EvidenceBundle(
                question=free, candidates=[Candidate(pathway="parametric", answer=Answer.of_text("Levothyroxine"))]
            ),
            program="direct",
        ),
    ]
    run = write_run_folder(
        tmp_path / "run", decisions, program="direct", benchmark="mixed", source="memory", seconds=0.5
    )
    report = write_html_report([run], tmp_path / "out")
    assert report.question_pages == 3
    crashed = (tmp_path / "out" / "runs" / "run" / "q" / page_name(0, "crash-1")).read_text()
    assert "RuntimeError: boom" in crashed
    assert "<code>crashed</code>" in crashed
    unparsed = (tmp_path / "out" / "runs" / "run" / "q" / page_name(1, "unparsed-1")).read_text()
    assert "no option letter" in unparsed
    assert "&lt;i&gt;maybe&lt;/i&gt;" in unparsed
    free_page = (tmp_path / "out" / "runs" / "run" / "q" / page_name(2, "free-1")).read_text()
    assert "Levothyroxine" in free_page
    assert "Reference answer:" in free_page
    listing = (tmp_path / "out" / "runs" / "run" / "index.html").read_text()
    for value in ('data-correct="unscored"', 'data-status="failed"', 'data-status="unparsed"', 'data-error="yes"'):
        assert value in listing, value


def test_only_web_addresses_become_links_and_long_text_is_folded() -> None:
    from clearmed.report.html_views import fold_text, safe_href

    assert safe_href("https://www.nih.gov/a?b=1") == "https://www.nih.gov/a?b=1"
    for bad in (
        "javascript:alert(1)",
        "JAVASCRIPT:x",
        "data:text/html,<b>",
        "file:///etc/passwd",
        'https://a" onmouseover="x',
    ):
        assert safe_href(bad) is None, bad
    head, tail = fold_text("word " * 400)
    assert head + tail == ("word " * 400)
    assert 300 < len(head) <= 600
    assert fold_text("short\n\n\n\ntext") == ("short\n\ntext", "")


def test_a_missing_chromium_is_one_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from clearmed.report import headless

    monkeypatch.setattr(headless.shutil, "which", lambda name: None)
    assert headless.find_chromium() is None
    with pytest.raises(headless.ChromiumError, match="no Chromium found"):
        headless.dump_dom(tmp_path / "index.html")


def test_a_question_page_shows_trimmed_evidence_and_the_thinking(tmp_path: Path) -> None:
    from clearmed.signatures.records import Answer, CallUsage, Decision, EvidenceBundle
    from clearmed.testing import QUESTION

    usage = [
        CallUsage(stage="parametric", prompt_tokens=10),
        CallUsage(
            stage="verifier",
            prompt_tokens=900,
            passages_dropped=3,
            fit_tokens=7700,
            thinking="<b>cold intolerance</b> points to",
            thinking_chars=9000,
        ),
    ]
    decision = Decision(
        question_id=QUESTION.id,
        status="answered",
        answer=Answer.of_letters("A"),
        deciding_rule="verifier",
        bundle=EvidenceBundle(question=QUESTION, candidates=[]),
        usage=usage,
        program="clear",
    )
    run = write_run_folder(tmp_path / "run", [decision], program="clear", benchmark="toy", source="memory", seconds=1)
    write_html_report([run], tmp_path / "out")
    html = (tmp_path / "out" / "runs" / "run" / "q" / page_name(0, QUESTION.id)).read_text()
    assert "verifier: 3 passages dropped to fit 7,700 prompt tokens" in html
    assert "verifier: thinking (9000 characters, the first 33 kept)" in html
    assert "&lt;b&gt;cold intolerance&lt;/b&gt; points to" in html  # the model's words, escaped
    assert "parametric: thinking" not in html


def test_the_question_page_shows_the_structured_verdict(report_runs: dict[str, Path]) -> None:
    # Issue 46: the verifier's structured verdict in the verifier table and the trail; a field not judged is not shown.
    record = next(r for r in read_records(report_runs["paper"]) if r.decision.verifier_outputs)
    verdict = VerifierVerdict(consensus_refuted=True, question_aligned=False, support_scope="related_task")
    decision = record.decision
    outputs = [o.model_copy(update={"verdict": verdict}) for o in decision.verifier_outputs]
    steps = [s.model_copy(update={"verifier": outputs[0]}) if s.verifier else s for s in decision.steps]
    changed = decision.model_copy(update={"verifier_outputs": outputs, "steps": steps})
    html = render_question_page(
        question_page(record.model_copy(update={"decision": changed}), None), report_runs["paper"]
    )
    assert "<th>verdict</th>" in html
    shown = len(outputs) + sum(1 for s in steps if s.verifier)
    assert html.count('<li class="yes">consensus refuted: true</li>') == shown
    assert '<li class="no">question aligned: false</li>' in html
    assert "<li>support scope: related task</li>" in html
    assert "web supported" not in html
