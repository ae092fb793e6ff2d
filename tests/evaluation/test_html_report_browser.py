"""The report in a real browser: headless Chromium opens the pages from disk and the rendered DOM is checked.

Skipped where Chromium is absent (Debian: `apt-get install chromium`; see the README)."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from clearmed.evaluation import read_records
from clearmed.report.headless import dump_dom, find_chromium
from clearmed.report.html_views import page_name

pytestmark = pytest.mark.skipif(find_chromium() is None, reason="Chromium is not installed (apt-get install chromium)")


class Rows(HTMLParser):
    """The question list's rows as Chromium left them: their data attributes and whether they are hidden."""

    def __init__(self, dom: str) -> None:
        super().__init__()
        self.rows: list[dict[str, str | None]] = []
        self.body: dict[str, str | None] = {}
        self.feed(dom)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "tr" and any(name == "data-index" for name, _ in attrs):
            self.rows.append(dict(attrs))
        if tag == "body":
            self.body = dict(attrs)


def test_the_list_filters_in_the_browser(report_dir: Path, report_runs: dict[str, Path]) -> None:
    records = list(read_records(report_runs["paper"]))
    wrong = {r.question_id for r in records if r.score is not None and not r.score.correct}
    listing = report_dir / "runs" / "paper" / "index.html"

    everything = Rows(dump_dom(listing))
    assert len(everything.rows) == len(records)
    assert not any("hidden" in row for row in everything.rows)

    filtered_dom = dump_dom(listing, "correct=wrong")
    filtered = Rows(filtered_dom)
    shown = [row for row in filtered.rows if "hidden" not in row]
    assert {row["data-correct"] for row in shown} == {"wrong"}
    assert len(shown) == len(wrong)
    assert f"{len(wrong)} of {len(records)} shown" in filtered_dom

    # Two filters and a sort at once: the most expensive consensus answers first.
    combined = Rows(dump_dom(listing, "route=consensus&sort=calls"))
    shown = [row for row in combined.rows if "hidden" not in row]
    assert shown
    assert {row["data-route"] for row in shown} == {"consensus"}
    calls = [int(row["data-calls"] or 0) for row in shown]
    assert calls == sorted(calls, reverse=True)


def test_a_question_page_shows_its_trail_in_the_browser(report_dir: Path, report_runs: dict[str, Path]) -> None:
    record = next(r for r in read_records(report_runs["paper"]) if r.decision.bundle.followups)
    dom = dump_dom(report_dir / "runs" / "paper" / "q" / page_name(record.index, record.question_id))
    assert "Adjudication trail" in dom
    assert len(re.findall(r'<tr class="step', dom)) == len(record.decision.steps)
    assert len(re.findall(r'<div class="passage', dom)) == len(
        {p.id for p in [*record.decision.bundle.local_passages, *record.decision.bundle.all_dynamic_passages()]}
    )


def test_no_script_from_evidence_runs_in_the_browser(report_dir: Path, report_runs: dict[str, Path]) -> None:
    records = list(read_records(report_runs["hostile"]))
    planted = records[-1]
    dom = dump_dom(report_dir / "runs" / "hostile" / "q" / page_name(planted.index, planted.question_id))
    body = Rows(dom).body
    assert "data-pwned" not in body, body  # neither the <script> nor the onerror handler ran
    assert "&lt;script&gt;document.body.setAttribute(" in dom  # the page is there, as text
    assert "<title>adv-3" in dom  # the planted </title> did not close the real one
    listing = dump_dom(report_dir / "runs" / "hostile" / "index.html")
    assert "data-pwned" not in Rows(listing).body
