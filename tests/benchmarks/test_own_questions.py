"""Your own questions (`load_benchmark("questions", source=FILE)`): the format `clearmed.evaluate` takes a list in,
read from a JSONL file or a JSON list, with the ids the Python API gives, each bad row one line naming its file and
line (or skipped and counted), and each question's answer mode its own, never its gold's."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from clearmed.api.questions import question_of
from clearmed.benchmarks import BenchmarkDataError, BenchmarkSourceError, UnknownBenchmarkError, load_benchmark

ROWS: list[dict[str, object]] = [
    {"question": "Which vitamin deficiency causes scurvy?", "options": ["Vitamin D", "Vitamin C"], "answer": "B"},
    {"id": "htn-1", "question": "First-line drug for hypertension?", "options": {"A": "Thiazide", "B": "Digoxin"}},
    {"question": "Which are B vitamins?", "options": ["Thiamine", "Retinol", "Niacin"], "answer": "A,C", "multi": True},
    {"question": "What causes rickets?", "answer": "vitamin D deficiency", "context": "A child with bowed legs."},
]


def _jsonl(path: Path, rows: Sequence[object]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def test_a_jsonl_file_loads_as_the_api_reads_the_same_list(tmp_path: Path) -> None:
    bench = load_benchmark("questions", source=_jsonl(tmp_path / "mine.jsonl", ROWS))
    assert bench.questions == [question_of(row) for row in ROWS]
    # A given id is kept; the others are the digest of text and options: the same on every read.
    assert [q.id for q in bench.questions][1] == "htn-1"
    assert all(q.id.startswith("q-") for q in bench.questions if q.id != "htn-1")
    assert [q.answer_mode for q in bench.questions] == ["single", "single", "multi", "free_text"]
    assert (bench.questions[2].gold_letters, bench.questions[3].gold_text) == (["A", "C"], "vitamin D deficiency")
    assert (bench.name, bench.source, bench.split) == ("questions", str(tmp_path / "mine.jsonl"), "mine")


def test_a_json_list_is_the_same_questions(tmp_path: Path) -> None:
    listed = tmp_path / "mine.json"
    listed.write_text(json.dumps(ROWS), encoding="utf-8")
    assert load_benchmark("questions", source=listed).questions == [question_of(row) for row in ROWS]


def test_limit_and_seed_sample_as_for_a_benchmark(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "mine.jsonl", [{"question": f"Case {n}?", "options": ["x", "y"]} for n in range(10)])
    three = load_benchmark("questions", source=path, limit=3, seed=7).questions
    assert three == load_benchmark("questions", source=path, limit=3, seed=7).questions
    assert len(three) == 3
    assert {q.id for q in three} < {q.id for q in load_benchmark("questions", source=path, limit=5, seed=7).questions}


def test_the_mode_is_the_question_s_own_never_its_gold(tmp_path: Path) -> None:
    # Two rows that differ only in the gold (one letter, then two) load as the same question but for the gold: a
    # second gold letter without "multi" is refused, never read as a multi-answer question.
    rows = [{"question": "Which?", "options": ["x", "y", "z"], "answer": gold, "multi": True} for gold in ("A", "A,C")]
    first, second = load_benchmark("questions", source=_jsonl(tmp_path / "a.jsonl", rows[:1])).questions + (
        load_benchmark("questions", source=_jsonl(tmp_path / "b.jsonl", rows[1:])).questions
    )
    assert first.model_dump(exclude={"gold_letters"}) == second.model_dump(exclude={"gold_letters"})
    assert first.answer_mode == "multi"
    single = _jsonl(tmp_path / "c.jsonl", [{"question": "Which?", "options": ["x", "y", "z"], "answer": "A,C"}])
    with pytest.raises(BenchmarkDataError, match=r"c\.jsonl:1: .*exactly one gold letter"):
        load_benchmark("questions", source=single)


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ({"question": "Which?", "options": "x, y"}, "options: give a list of option texts"),
        ({"question": "Which?", "options": ["x", "y"], "answer": "C"}, r"gold letters \['C'\] are not among"),
        ({"text": "Which?"}, "question: Field required; text: Extra inputs are not permitted"),
        ({"question": "Which?", "options": ["x"]}, "a single question needs at least two options"),
        (["Which?"], "JSON line is not an object"),
    ],
)
def test_a_bad_row_is_one_line_naming_its_file_and_line(tmp_path: Path, line: object, reason: str) -> None:
    path = _jsonl(tmp_path / "mine.jsonl", [ROWS[0], line, ROWS[1]])
    with pytest.raises(BenchmarkDataError, match=rf"^{tmp_path / 'mine.jsonl'}:2: {reason}"):
        load_benchmark("questions", source=path)
    skipped = load_benchmark("questions", source=path, on_error="skip")
    assert [q.id for q in skipped.questions] == [question_of(ROWS[0]).id, "htn-1"]
    assert [issue.location for issue in skipped.skipped] == [f"{path}:2"]


def test_the_same_id_twice_is_one_line_naming_both_lines(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "mine.jsonl", [ROWS[0], ROWS[1], ROWS[0]])
    with pytest.raises(BenchmarkDataError, match=r"mine\.jsonl:3: duplicate question id q-\w+ \(first at .*:1\)"):
        load_benchmark("questions", source=path)


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        (None, None, r"^questions: give your questions file as the source \(--source FILE\)"),
        ("gone.jsonl", None, r"gone\.jsonl: no such file"),
        ("mine.csv", "question\nWhich?\n", r"mine\.csv: your questions are a JSONL file \(or a JSON list\)"),
        ("mine.json", '{"question": "Which?"}', r"mine\.json: expected a JSON list of questions, got dict"),
    ],
)
def test_a_source_that_is_no_questions_file_is_one_line(
    tmp_path: Path, name: str | None, content: str | None, message: str
) -> None:
    source = None if name is None else tmp_path / name
    if source is not None and content is not None:
        source.write_text(content, encoding="utf-8")
    with pytest.raises(BenchmarkSourceError, match=message):
        load_benchmark("questions", source=source)


def test_an_unknown_name_says_how_to_run_your_own_questions() -> None:
    with pytest.raises(UnknownBenchmarkError, match=r"unknown benchmark 'custom'; .*or 'questions' with your own file"):
        load_benchmark("custom", source="my.jsonl")
