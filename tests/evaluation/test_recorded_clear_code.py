"""Recorded pathways from the CLEAR code's run files: direct / bm25 / online ``results.jsonl`` and a CLEAR run's rows.

The fixtures are written in the upstream schema, as the CLEAR code writes them (``methods/common/io.write_jsonl``:
one ``json.dumps(row, ensure_ascii=True)`` per line; rows as ``methods/direct/run_direct.py``,
``methods/BM25/run_bm25.py`` and ``methods/clear/run_clear.py`` build them; ``trace.retrieved_docs`` as
``summarize_retrieved_docs`` keeps them; web sources as ``structured.normalize_sources``, scored as
``source_quality.score_source``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from clearmed.recorded import RecordedPathwayError, clear_code_rows, read_recorded_pathway
from clearmed.signatures.records import Question

OPTIONS = {"A": "Cortisol", "B": "Insulin", "C": "Thyroxine", "D": "Aldosterone"}
GOLD = "ABCDA"


def _questions(n: int = 5, split: str = "test") -> list[Question]:
    return [
        Question(id=f"medqa:{split}:{i}", text=f"Question {i}?", options=OPTIONS, gold_letters=[GOLD[i]])
        for i in range(n)
    ]


def _row(i: int, pred: str | None, raw: str, method: str = "direct", **trace: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "id": str(i),
        "pred": pred,
        "gold": GOLD[i],
        "correct": pred == GOLD[i],
        "raw_response": raw,
        "trace": {"method": method, "model": "o3-mini", "retriever": "none", "corpus": "none", "top_k": 0, **trace},
    }
    return row


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row, ensure_ascii=True) + "\n" for row in rows), encoding="utf-8")
    return path


def _docs(i: int) -> list[dict[str, Any]]:
    return [
        {"id": f"pubmed_{i}_0", "corpus": "pubmed", "title": "Adrenal crisis", "score": 12.5, "content": "Give ..."},
        {"id": f"textbooks_{i}_3", "corpus": "textbooks", "title": "Endocrine", "score": 9.0, "content": "Insulin."},
        {"id": "empty", "corpus": "pubmed", "title": "x", "score": 1.0, "content": ""},  # nothing to read: left out
    ]


def _evidence() -> dict[str, Any]:
    return {
        "evidence_summary": "Cortisol replacement first.",
        "key_facts": ["Hydrocortisone is given in adrenal crisis."],
        "sources": [
            {
                "title": "NIH page",
                "url": "https://www.nih.gov/adrenal",
                "claim": "Give hydrocortisone.",
                "relevance": "r",
            },
            {"title": "A blog", "url": "https://someone.blogspot.com/p", "claim": "Maybe insulin.", "relevance": ""},
            {"title": "", "url": "", "claim": "", "relevance": ""},  # empty: left out
        ],
        "search_confidence": "high",
    }


# ------------------------------------------------------------------------------------------------ answers


def test_a_direct_run_gives_each_question_its_pred_rationale_and_model(tmp_path: Path) -> None:
    results = _write(
        tmp_path / "runs/2025-01-01_000000_direct_medqa_test_full_o3-mini/results.jsonl",
        [
            _row(0, "A", "A"),
            _row(1, None, "It could be either.", error="could not parse answer option"),  # a reply naming none
            _row(2, None, "", error="Request timed out."),  # the call failed: no reply
            _row(3, "E", "E"),  # a letter that is no option of the question
            _row(4, "a", "a"),
        ],
    )
    questions = _questions()
    recorded = read_recorded_pathway(results, "parametric", questions)
    assert recorded.layout == "clear_code"
    assert recorded.model == "o3-mini"
    assert recorded.label == "direct-o3-mini"
    assert recorded.counts() == {"ok": 2, "unparseable": 2, "missing": 1}
    first = recorded.candidate(questions[0])
    assert first.answer is not None
    assert first.answer.letters == ("A",)
    assert first.recorded_from == f"{results} id=0"
    assert recorded.replies["medqa:test:4"].letters == ("A",)
    unparseable = recorded.candidate(questions[1])
    assert unparseable.answer is None
    assert unparseable.rationale == "It could be either."
    assert unparseable.error is not None
    assert "names no option: could not parse answer option" in unparseable.error.message
    failed = recorded.candidate(questions[2])
    assert failed.error is not None
    assert "no recorded reply: Request timed out." in failed.error.message
    assert "'E' is not an option" in recorded.replies["medqa:test:3"].note


def test_a_recorded_answer_its_own_rationale_contradicts_keeps_the_answer_and_the_rationale(tmp_path: Path) -> None:
    # As for MIRAGE: the adjudication sees what the pathway answered (the CLEAR code's own parse, which its verifier
    # saw too); the contradiction stays visible in the rationale.
    results = _write(tmp_path / "direct.jsonl", [_row(0, "B", "Cortisol is low in Addison disease, so A.\nB")])
    reply = read_recorded_pathway(results, "parametric", _questions(1)).replies["medqa:test:0"]
    assert reply.letters == ("B",)
    assert reply.rationale.startswith("Cortisol is low in Addison disease, so A.")


# ------------------------------------------------------------------------------------------------ evidence


def test_a_bm25_run_gives_its_retrieved_documents_as_local_passages(tmp_path: Path) -> None:
    rows = [_row(i, GOLD[i], GOLD[i], "bm25", retriever="BM25", top_k=16, retrieved_docs=_docs(i)) for i in range(2)]
    run_dir = tmp_path / "2025-01-01_000000_bm25_medqa_test_full_o3-mini"
    _write(run_dir / "results.jsonl", rows)
    (run_dir / "config.json").write_text("{}", encoding="utf-8")
    questions = _questions(2)
    recorded = read_recorded_pathway(run_dir, "local", questions)  # the run folder, as well as its file
    assert recorded.layout == "clear_code"
    result = recorded.result_for(recorded.replies["medqa:test:1"])
    assert [p.id for p in result.passages] == ["L1", "L2"]
    assert result.candidate.passage_ids == ["L1", "L2"]
    first = result.passages[0]
    assert first.pathway == "local"
    assert first.title == "Adrenal crisis"
    assert first.provenance.corpus == "pubmed"
    assert first.provenance.doc_id == "pubmed_1_0"
    assert first.provenance.score == 12.5
    assert first.provenance.rank == 1


def test_an_online_run_gives_its_sources_with_urls_and_quality(tmp_path: Path) -> None:
    row = _row(0, "A", "A", "online_search", retriever="online_search", search_provider="tavily")
    row["evidence"] = _evidence()
    row["evidence"]["sources"][0] |= {"quality_tier": "high", "quality_score": 0.9, "quality_reason": "NIH"}
    results = _write(tmp_path / "online.jsonl", [row])
    recorded = read_recorded_pathway(results, "dynamic", _questions(1))
    result = recorded.result_for(recorded.replies["medqa:test:0"])
    # the run's own summary and key facts first, as the code's verifier reads them (`prompts.format_evidence`)
    assert [p.id for p in result.passages] == ["WS", "WK", "W1", "W2"]
    summary, facts, nih, blog = result.passages
    assert summary.text == "Cortisol replacement first."
    assert facts.text == "- Hydrocortisone is given in adrenal crisis."
    assert (summary.quality, facts.quality) == (None, None)  # no source: no label, no count
    assert nih.provenance.kind == "web"
    assert nih.provenance.url == "https://www.nih.gov/adrenal"
    assert nih.provenance.domain is not None
    assert "nih.gov" in nih.provenance.domain
    assert nih.provenance.backend == "tavily"
    assert nih.text == "Give hydrocortisone."
    # the CLEAR code's own label where it was recorded; its domain table elsewhere (blogspot.com: 0.25, low)
    assert nih.quality == "high"
    assert nih.quality_reason is not None
    assert nih.quality_reason.startswith("the CLEAR code's source quality 0.9")
    assert blog.quality == "low"
    assert blog.quality_reason == "CLEAR code table 0.25: blog platform"
    assert result.quality.origin == "prior"
    assert result.quality.label_of("W1") == "high"
    assert (result.quality.n_high, result.quality.n_medium, result.quality.n_low) == (1, 0, 1)


def test_an_untiered_source_is_labelled_by_the_clear_code_table_not_clearmeds_priors(tmp_path: Path) -> None:
    # medscape.com: the code's medium list (0.70); clearmed's priors rate it otherwise. fda.gov: the code's generic
    # .gov rule (0.75, medium). nccn.org: the code's high list.
    row = _row(0, "A", "A", "online_search")
    row["evidence"] = {
        "sources": [
            {"title": "t", "url": "https://www.medscape.com/x", "claim": "c1"},
            {"title": "t", "url": "https://www.fda.gov/x", "claim": "c2"},
            {"title": "t", "url": "https://www.nccn.org/x", "claim": "c3"},
        ]
    }
    results = _write(tmp_path / "online.jsonl", [row])
    reply = read_recorded_pathway(results, "dynamic", _questions(1)).replies["medqa:test:0"]
    assert [p.quality for p in reply.passages] == ["medium", "medium", "high"]


def test_a_clear_runs_rows_give_each_pathway_its_candidate(tmp_path: Path) -> None:
    bm25 = _row(0, "B", "B", "bm25", retrieved_docs=_docs(0))
    online = _row(0, "C", "C", "online_search")
    row = {
        "id": "0",
        "pred": "A",
        "gold": "A",
        "raw_response": "{...verifier...}",
        "candidates": {
            "direct": {"pred": "A", "raw_response": "A", "trace": {"method": "direct", "model": "gpt-4o"}},
            "bm25": {key: bm25[key] for key in ("pred", "raw_response", "trace")},
            "online": {key: online[key] for key in ("pred", "raw_response", "trace")},
        },
        "evidence": _evidence(),
        "verifier": {"source_quality": {"sources": [{"url": "https://someone.blogspot.com/p", "quality_tier": "low"}]}},
        "trace": {"method": "clear", "model": "gpt-4o"},
    }
    results = _write(tmp_path / "clear/results.jsonl", [row])
    questions = _questions(1)
    letters = {
        pathway: read_recorded_pathway(results, pathway, questions).replies["medqa:test:0"].letters  # type: ignore[arg-type]
        for pathway in ("parametric", "local", "dynamic")
    }
    assert letters == {"parametric": ("A",), "local": ("B",), "dynamic": ("C",)}
    assert read_recorded_pathway(results, "parametric", questions).model == "gpt-4o"
    dynamic = read_recorded_pathway(results, "dynamic", questions).replies["medqa:test:0"]
    # the verifier's source-quality report labels the blog (by its URL); the NIH page, unreported, by the table
    assert [p.quality for p in dynamic.passages if p.quality][1] == "low"
    assert dynamic.quality.assessments[1].reason.startswith("the CLEAR code's source quality")
    assert read_recorded_pathway(results, "parametric", questions).replies["medqa:test:0"].passages == []


# ------------------------------------------------------------------------------------------------ ids, files


def refusal(results: Path, questions: list[Question]) -> str:
    """The one-line refusal of reading `results` for `questions`."""
    with pytest.raises(RecordedPathwayError) as caught:
        read_recorded_pathway(results, "parametric", questions)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_ids_the_file_lacks_are_counted_missing_and_none_at_all_is_one_line(tmp_path: Path) -> None:
    results = _write(tmp_path / "direct.jsonl", [_row(0, "A", "A"), _row(1, "B", "B")])
    recorded = read_recorded_pathway(results, "parametric", _questions(4))
    assert recorded.counts() == {"ok": 2, "unparseable": 0, "missing": 2}
    others = [Question(id=f"medqa:test:{i}", text="Q?", options=OPTIONS, gold_letters=["A"]) for i in (7, 8)]
    message = refusal(results, others)
    assert "no recorded answer for any of the 2 questions (first: medqa:test:7, looked up as id 7" in message
    assert "the file's first ids: 0, 1" in message


def test_a_row_whose_gold_is_not_the_questions_refuses_the_whole_file(tmp_path: Path) -> None:
    # Same id, another question (another split or data file): never dropped row by row, the file is refused.
    wrong = _row(1, "B", "B") | {"gold": "D"}
    results = _write(tmp_path / "direct.jsonl", [_row(0, "A", "A"), wrong])
    message = refusal(results, _questions(2))
    assert "row 1 is not question medqa:test:1 (its gold is D, the question's B)" in message


def test_a_file_misaligned_by_one_row_is_refused_naming_the_first_mismatching_id(tmp_path: Path) -> None:
    # Issue 46: each row holds the next question's reply and gold under this question's id. Filtering by gold kept
    # the rows whose gold happened to agree (rows 0 and 2 here), answers to other questions scored against this one.
    golds = "AABBC"
    questions = [
        Question(id=f"medqa:test:{i}", text=f"Question {i}?", options=OPTIONS, gold_letters=[gold])
        for i, gold in enumerate(golds)
    ]
    shifted = [{**_row(0, golds[i + 1], golds[i + 1]), "id": str(i), "gold": golds[i + 1]} for i in range(4)]
    message = refusal(_write(tmp_path / "direct.jsonl", shifted), questions)
    assert "row 1 is not question medqa:test:1" in message
    assert "none of it is read" in message


def test_a_row_that_records_another_questions_text_refuses_the_file(tmp_path: Path) -> None:
    row = _row(0, "A", "A") | {"question": "Which hormone is given first in adrenal crisis?"}
    results = _write(tmp_path / "direct.jsonl", [row])
    with pytest.raises(RecordedPathwayError, match=r"row 0 is not question medqa:test:0 \(its question begins"):
        read_recorded_pathway(results, "parametric", _questions(1))
    same = _row(0, "A", "A") | {"question": "Question 0?"}
    assert (
        read_recorded_pathway(_write(tmp_path / "same.jsonl", [same]), "parametric", _questions(1)).counts()["ok"] == 1
    )


def test_questions_the_clear_codes_ids_cannot_tell_apart_are_refused(tmp_path: Path) -> None:
    results = _write(tmp_path / "direct.jsonl", [_row(0, "A", "A")])
    two = [
        Question(id=f"mmlu:{subject}:test:0", text="Q?", options=OPTIONS, gold_letters=["A"])
        for subject in ("anatomy", "virology")
    ]
    with pytest.raises(RecordedPathwayError, match=r"would both be row 0 .*--split"):
        read_recorded_pathway(results, "parametric", two)


def test_a_missing_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(RecordedPathwayError, match=r"results\.jsonl: no such folder") as caught:
        read_recorded_pathway(tmp_path / "run" / "results.jsonl", "parametric", _questions(1))
    assert "\n" not in str(caught.value)


def test_rows_are_read_as_the_clear_replay_reads_them(tmp_path: Path) -> None:
    # An old file with a raw U+2028 inside a reply (a line break to `splitlines`), a pretty-printed row, a damaged
    # line (passed over: its question has no recorded answer), a row without an id, and an id written twice.
    lines = [
        json.dumps(_row(0, "A", "first\u2028line"), ensure_ascii=False),
        '{"id": "1", "pred": "B", "raw_',
        json.dumps(_row(2, "C", "C"), indent=2),
        json.dumps({"pred": "A"}),
        json.dumps(_row(3, "A", "A")),
        json.dumps(_row(3, "D", "D")),
    ]
    path = tmp_path / "results.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    rows = clear_code_rows(path)
    assert sorted(rows) == ["0", "2", "3"]
    assert rows["0"]["raw_response"] == "first\u2028line"
    assert rows["3"]["pred"] == "D"
    recorded = read_recorded_pathway(path, "parametric", _questions(4))
    assert recorded.replies["medqa:test:1"].status == "missing"


def test_a_file_that_is_not_text_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    path.write_bytes(b"\xff\xfe\x00binary")
    with pytest.raises(RecordedPathwayError, match="not UTF-8"):
        read_recorded_pathway(path, "parametric", _questions(1))
