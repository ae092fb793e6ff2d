"""Recorded pathways: MIRAGE's benchmark.json and prediction files, and clearmed's own run folders, read back.

Fixtures are written in the upstream layouts (MIRAGE ``benchmark.json`` and
``prediction/<subset>/cot/OpenAI/<model>/test_<id>.json``); the shared copy of MIRAGE, where present, checks the
reader on every real reply.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clearmed.benchmarks import BenchmarkSourceError, load_benchmark
from clearmed.evaluation.store import EvalRecord, read_records
from clearmed.recorded import (
    RecordedPathwayError,
    locate_answer,
    mirage_reply,
    read_recorded_pathway,
)
from clearmed.retrieval.corpus import CorpusError
from clearmed.retrieval.corpus_presets import shared_data_root
from clearmed.signatures.records import Question
from clearmed.testing.synthetic_run import write_synthetic_run


def _shared_mirage() -> Path:
    try:
        return shared_data_root() / "mirage"
    except CorpusError:
        return Path("/nonexistent")


SHARED_MIRAGE = _shared_mirage()
OPTIONS = {"A": "Cortisol", "B": "Insulin", "C": "Thyroxine", "D": "Ketotifen eye drops"}


def _benchmark_json(tmp_path: Path) -> Path:
    document = {
        "medqa": {
            f"{i:04d}": {"question": f"Question {i}?", "options": OPTIONS, "answer": "ABCD"[i % 4]} for i in range(6)
        },
        "pubmedqa": {
            "12345": {"question": "Does it work?", "options": {"A": "yes", "B": "no", "C": "maybe"}, "answer": "A"}
        },
    }
    path = tmp_path / "benchmark.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def _reply(thinking: str, choice: str) -> str:
    return json.dumps({"step_by_step_thinking": thinking, "answer_choice": choice})


def _prediction_folder(tmp_path: Path, replies: dict[str, object]) -> Path:
    folder = tmp_path / "prediction" / "medqa" / "cot" / "OpenAI" / "gpt-4-32k"
    folder.mkdir(parents=True)
    for native, content in replies.items():
        (folder / f"test_{native}.json").write_text(content if isinstance(content, str) else json.dumps(content))
    return folder


def _question(options: dict[str, str] = OPTIONS) -> Question:
    return Question(id="mirage:medqa:0000", text="Q?", options=options, gold_letters=["A"])


# ------------------------------------------------------------------------------------------------ benchmark


def test_mirage_subsets_load_with_mirages_own_ids_in_sorted_order(tmp_path: Path) -> None:
    source = _benchmark_json(tmp_path)
    medqa = load_benchmark("mirage-medqa", source=source)
    assert [q.id for q in medqa.questions] == [f"mirage:medqa:{i:04d}" for i in range(6)]
    assert medqa.questions[1].gold_letters == ["B"]
    assert medqa.questions[0].answer_mode == "single"
    pubmedqa = load_benchmark("mirage-pubmedqa", source=source)
    assert pubmedqa.questions[0].options == {"A": "yes", "B": "no", "C": "maybe"}


def test_a_subset_the_file_lacks_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(BenchmarkSourceError, match=r"no 'bioasq' subset \(it has \['medqa', 'pubmedqa'\]\)"):
        load_benchmark("mirage-bioasq", source=_benchmark_json(tmp_path))


def test_mirage_has_no_hub_copy_and_says_where_to_get_it() -> None:
    with pytest.raises(BenchmarkSourceError, match=r"download https://github\.com/Teddy-XiongGZ/MIRAGE"):
        load_benchmark("mirage-medqa")


# ------------------------------------------------------------------------------------------------ locating


@pytest.mark.parametrize(
    ("choice", "letter", "how"),
    [
        ("B", "B", "letter"),
        ("B. Insulin", "B", "pattern"),
        ("A/B", "A", "pattern"),  # MIRAGE takes the first of several letters
        ("Option C", "C", "pattern"),
        ("The answer is: D", "D", "pattern"),
        ("ketotifen eye drops", "D", "option_text"),  # the option's text without its letter
        ("None of the above", None, None),  # MIRAGE would score this as A
        ("E", None, None),  # not an option of this question
        ("", None, None),
    ],
)
def test_the_answer_is_located_as_mirage_does_but_never_made_up(
    choice: str, letter: str | None, how: str | None
) -> None:
    assert locate_answer(choice, OPTIONS) == (letter, how)


def test_a_reply_that_is_not_json_is_searched_after_its_answer_choice_key() -> None:
    # GPT-3.5 sometimes broke its own JSON (an unescaped quote in the thinking); MIRAGE splits on the key.
    raw = ['{"step_by_step_thinking": "the "classic" sign...", "answer_choice": "C. Thyroxine"}']
    reply = mirage_reply(_question(), raw, "f.json")
    assert reply.status == "ok"
    assert reply.letters == ("C",)
    assert reply.located_by == "pattern"


def test_a_refusal_or_an_empty_file_is_recorded_unparseable_not_as_letter_a() -> None:
    refusal = ["The response was filtered due to the prompt triggering Azure OpenAI's content management policy."]
    for raw in (refusal, [], None, [{"not": "a string"}]):
        reply = mirage_reply(_question(), raw, "f.json")
        assert reply.status == "unparseable"
        assert reply.letters == ()


def test_a_recorded_answer_its_rationale_contradicts_keeps_the_answer_and_the_rationale() -> None:
    # The adjudication sees what the pathway answered; the contradiction stays visible in the rationale.
    raw = [_reply("Cortisol is deficient in Addison disease, so the answer is A.", "B")]
    reply = mirage_reply(_question(), raw, "f.json")
    assert reply.letters == ("B",)
    assert reply.rationale.endswith("the answer is A.")


# ------------------------------------------------------------------------------------------------ folders


def test_a_mirage_folder_gives_each_question_its_reply_and_provenance(tmp_path: Path) -> None:
    bench = load_benchmark("mirage-medqa", source=_benchmark_json(tmp_path))
    folder = _prediction_folder(
        tmp_path,
        {
            "0000": [_reply("t0", "A")],
            "0001": [_reply("t1", "None of the above")],
            "0002": "{not json",
            "0003": [_reply("t3", "D")],
        },
    )
    recorded = read_recorded_pathway(folder, "parametric", bench.questions)
    assert recorded.model == "OpenAI/gpt-4-32k"
    assert recorded.layout == "mirage"
    assert recorded.counts() == {"ok": 2, "unparseable": 2, "missing": 2}
    first = recorded.candidate(bench.questions[0])
    assert first.answer is not None
    assert first.answer.letters == ("A",)
    assert first.model == "OpenAI/gpt-4-32k"
    assert first.rationale == "t0"
    assert first.error is None
    missing = recorded.candidate(bench.questions[5])
    assert missing.answer is None
    assert missing.error is not None
    assert "no recorded reply" in missing.error.message
    assert recorded.replies[bench.questions[0].id].source.endswith("test_0000.json")


def test_ids_that_are_not_mirages_are_refused_in_one_line(tmp_path: Path) -> None:
    folder = _prediction_folder(tmp_path, {"0000": [_reply("t", "A")]})
    other = Question(id="medqa:test:0", text="Q?", options=OPTIONS, gold_letters=["A"])
    with pytest.raises(RecordedPathwayError, match=r"not a MIRAGE question id.*run a mirage-\* benchmark"):
        read_recorded_pathway(folder, "parametric", [other])


def test_a_folder_with_no_reply_for_any_question_is_refused(tmp_path: Path) -> None:
    folder = _prediction_folder(tmp_path, {"9999": [_reply("t", "A")]})
    with pytest.raises(RecordedPathwayError, match="no recorded answer for any of the 1 questions"):
        read_recorded_pathway(folder, "parametric", [_question()])


def test_a_missing_folder_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(RecordedPathwayError, match="no such folder"):
        read_recorded_pathway(tmp_path / "absent", "local", [_question()])


def _synthetic_run(tmp_path: Path) -> tuple[Path, list[EvalRecord], list[Question]]:
    """A clearmed run folder of six scripted CLEAR decisions, its records and their questions."""
    run_dir = tmp_path / "run"
    write_synthetic_run(run_dir, n=6)
    records = list(read_records(run_dir))
    return run_dir, records, [record.decision.bundle.question for record in records]


def test_a_clearmed_run_folder_gives_its_pathway_candidates(tmp_path: Path) -> None:
    run_dir, records, questions = _synthetic_run(tmp_path)
    recorded = read_recorded_pathway(run_dir, "local", questions)
    assert recorded.layout == "clearmed"
    for record in records:
        live = record.decision.bundle.candidate("local")
        reply = recorded.replies[record.question_id]
        assert reply.letters == (live.answer.letters if live.answer else ())


def test_a_clearmed_run_folder_gives_each_pathway_the_evidence_it_read_and_its_quality_labels(tmp_path: Path) -> None:
    # Adjudicating a recorded online run again must see what the live run saw: its web results and their
    # high/medium/low labels (the guard counts them), and the local pathway's passages.
    run_dir, records, questions = _synthetic_run(tmp_path)
    dynamic = read_recorded_pathway(run_dir, "dynamic", questions)
    local = read_recorded_pathway(run_dir, "local", questions)
    parametric = read_recorded_pathway(run_dir, "parametric", questions)
    assert any(record.decision.bundle.source_quality.assessments for record in records)
    for record in records:
        bundle = record.decision.bundle
        reply = dynamic.replies[record.question_id]
        assert reply.passages == bundle.dynamic_passages
        assert reply.quality == bundle.source_quality
        result = dynamic.result_for(reply)
        assert result.quality == bundle.source_quality
        assert result.candidate.passage_ids == [p.id for p in bundle.dynamic_passages]
        assert local.replies[record.question_id].passages == bundle.local_passages
        assert not local.replies[record.question_id].quality.assessments
        assert parametric.replies[record.question_id].passages == []


@pytest.mark.skipif(not (SHARED_MIRAGE / "benchmark.json").is_file(), reason="no shared MIRAGE copy")
def test_every_shared_mirage_reply_is_read() -> None:
    bench = load_benchmark("mirage-medqa", source=SHARED_MIRAGE / "benchmark.json")
    folder = SHARED_MIRAGE / "prediction" / "medqa" / "cot" / "OpenAI" / "gpt-4-32k"
    recorded = read_recorded_pathway(folder, "parametric", bench.questions)
    counts = recorded.counts()
    assert counts["missing"] == 0
    assert counts["ok"] >= 0.95 * len(bench.questions)
