from __future__ import annotations

from pathlib import Path

import pytest

from clearmed.benchmarks import (
    BenchmarkSourceError,
    UnknownBenchmarkError,
    available_benchmarks,
    benchmark_info,
    load_benchmark,
    sample,
)

EXPECTED = {
    "medqa",
    "pubmedqa",
    "pubmedqa-noctx",
    "medmcqa",
    "medmcqa-single",
    "mmlu-medical",
    "mmlu-anatomy",
    "mmlu-clinical-knowledge",
    "mmlu-college-biology",
    "mmlu-college-medicine",
    "mmlu-medical-genetics",
    "mmlu-professional-medicine",
    "mmlu-pro-health",
    "nejm-qa",
    "medbullets",
    "medexqa",
    "afrimedqa",
    "medrbench-diagnosis",
    "medrbench-treatment",
    "healthbench",
    "healthbench-hard",
    "healthbench-consensus",
    "mirage-mmlu",
    "mirage-medqa",
    "mirage-medmcqa",
    "mirage-pubmedqa",
    "mirage-bioasq",
}


def test_registry_lists_every_benchmark_with_its_card() -> None:
    infos = {info.name: info for info in available_benchmarks()}
    assert set(infos) == EXPECTED
    assert infos["medqa"].hub_id == "GBaker/MedQA-USMLE-4-options"
    assert infos["medqa"].shared_file == "medqa/dev.jsonl"
    assert infos["nejm-qa"].answer_mode == "multi"
    assert infos["healthbench-hard"].answer_mode == "free_text"
    assert infos["medrbench-diagnosis"].hub_id is None
    assert infos["mirage-medqa"].shared_file == "../mirage/benchmark.json"
    assert all(info.scoring for info in infos.values())


def test_unknown_name_lists_the_available_ones() -> None:
    with pytest.raises(UnknownBenchmarkError, match=r"unknown benchmark 'medqa2'.*medqa"):
        load_benchmark("medqa2")
    with pytest.raises(UnknownBenchmarkError):
        benchmark_info("nope")


def test_bad_arguments_are_refused(fixtures: Path) -> None:
    source = fixtures / "medqa" / "test.jsonl"
    with pytest.raises(ValueError, match="on_error"):
        load_benchmark("medqa", source=source, on_error="ignore")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="limit"):
        load_benchmark("medqa", source=source, limit=-1)


def test_missing_file_names_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope.jsonl"
    with pytest.raises(BenchmarkSourceError, match=r"nope.jsonl: no such file"):
        load_benchmark("medqa", source=missing)


def test_unsupported_file_type(tmp_path: Path) -> None:
    path = tmp_path / "rows.xlsx"
    path.write_text("x")
    with pytest.raises(BenchmarkSourceError, match=r"unsupported file type .xlsx"):
        load_benchmark("medqa", source=path)


def test_empty_file_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text("\n")
    with pytest.raises(BenchmarkSourceError, match="no rows"):
        load_benchmark("medqa", source=path)


def test_no_hub_copy_for_medrbench() -> None:
    with pytest.raises(BenchmarkSourceError, match=r"no Hugging Face hub copy.*MedRBench"):
        load_benchmark("medrbench-diagnosis")


def test_unknown_split_is_refused() -> None:
    with pytest.raises(BenchmarkSourceError, match=r"unknown split 'dev'.*'test', 'train'"):
        load_benchmark("medqa", split="dev")


def test_sampling_is_deterministic_nested_and_in_source_order() -> None:
    items = list(range(100))
    first = sample(items, limit=10, seed=7)
    assert first == sample(items, limit=10, seed=7)
    assert first == sorted(first)
    assert len(set(first)) == 10
    assert set(first) <= set(sample(items, limit=30, seed=7))
    assert first != sample(items, limit=10, seed=8)
    assert sample(items, limit=5, seed=None) == [0, 1, 2, 3, 4]
    assert sample(items, limit=None, seed=3) == items
    assert sample(items, limit=500, seed=1) == items


def test_limit_and_seed_on_a_loaded_set(fixtures: Path) -> None:
    source = fixtures / "medqa" / "test.jsonl"
    full = load_benchmark("medqa", source=source)
    part = load_benchmark("medqa", source=source, limit=2, seed=1)
    again = load_benchmark("medqa", source=source, limit=2, seed=1)
    assert [q.id for q in part.questions] == [q.id for q in again.questions]
    assert len(part) == 2
    assert part.n_source_rows == full.n_source_rows == 3
    assert part.seed == 1
    assert part.limit == 2
