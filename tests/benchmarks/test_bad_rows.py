"""Malformed input: a clear error naming file and line, or skipped and counted with on_error="skip"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clearmed.benchmarks import BenchmarkDataError, load_benchmark


def test_malformed_json_line_raises_with_file_and_line(fixtures: Path) -> None:
    with pytest.raises(BenchmarkDataError) as caught:
        load_benchmark("medqa", source=fixtures / "medqa" / "bad.jsonl")
    assert caught.value.location.endswith("bad.jsonl:2")
    assert "malformed JSON line" in str(caught.value)
    assert caught.value.__cause__ is None  # no chained parser traceback


def test_skip_counts_every_bad_row_with_its_reason(fixtures: Path) -> None:
    bench = load_benchmark("medqa", source=fixtures / "medqa" / "bad.jsonl", on_error="skip")
    assert [q.id for q in bench.questions] == ["medqa:bad:0", "medqa:bad:4"]
    assert bench.n_source_rows == 5
    assert bench.n_skipped == 3
    issues = [(issue.location.rsplit("/", 1)[1], issue.reason) for issue in bench.skipped]
    assert issues == [
        ("bad.jsonl:2", "malformed JSON line (Expecting ',' delimiter)"),
        ("bad.jsonl:3", "gold ['E'] is not among the options ['A', 'B', 'C', 'D']"),
        ("bad.jsonl:4", "missing field 'question' (fields present: ['answer', 'answer_idx', 'options'])"),
    ]


def _write(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_gold_not_among_options_raises(tmp_path: Path) -> None:
    row = {"question": "q?", "options": {"A": "a", "B": "b"}, "answer_idx": "C"}
    with pytest.raises(BenchmarkDataError, match=r"rows.jsonl:1: gold \['C'\] is not among the options"):
        load_benchmark("medqa", source=_write(tmp_path / "rows.jsonl", [row]))


def test_wrong_field_type_and_inconsistent_answer_text(tmp_path: Path) -> None:
    rows = [
        {"question": 5, "options": {"A": "a", "B": "b"}, "answer_idx": "A"},
        {"question": "q?", "options": {"A": "a", "B": "b"}, "answer_idx": "A", "answer": "b"},
    ]
    bench = load_benchmark("medqa", source=_write(tmp_path / "rows.jsonl", rows), on_error="skip")
    assert [issue.reason for issue in bench.skipped] == [
        "field 'question' should be a string, got int",
        "answer text 'b' is not option A ('a')",
    ]


def test_duplicate_ids_are_bad_rows(tmp_path: Path) -> None:
    row = {"id": "same", "question": "q?", "opa": "a", "opb": "b", "opc": "c", "opd": "d", "cop": 0}
    path = _write(tmp_path / "dup.jsonl", [row, row])
    with pytest.raises(BenchmarkDataError, match=r"dup.jsonl:2: duplicate question id medmcqa:same \(first at"):
        load_benchmark("medmcqa", source=path)


def test_malformed_whole_json_file_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{\n  "PMC1": {\n    "raw_case": "x",\n  }\n')
    with pytest.raises(BenchmarkDataError, match=r"broken.json:4: malformed JSON"):
        load_benchmark("medrbench-diagnosis", source=path)


def test_csv_row_with_missing_columns(tmp_path: Path) -> None:
    path = tmp_path / "obgyn.csv"
    path.write_text('question,answer\n"q\nA. a\nB. b",A\nonly-one-field\n')
    bench = load_benchmark("nejm-qa", source=path, on_error="skip")
    assert len(bench.questions) == 1
    assert [(issue.location.rsplit("/", 1)[1], issue.reason) for issue in bench.skipped] == [
        ("obgyn.csv:5", "missing columns ['answer']")
    ]
