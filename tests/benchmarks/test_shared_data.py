"""The real public copies in ../shared/data (skipped where they are absent)."""

from __future__ import annotations

from pathlib import Path

import pytest

from clearmed.benchmarks import available_benchmarks, load_benchmark


def _bench(shared_data: Path, relative: str) -> Path:
    return shared_data / "benchmarks" / relative


def test_every_shared_file_named_in_the_registry_exists(shared_data: Path) -> None:
    for info in available_benchmarks():
        if info.shared_file:
            assert _bench(shared_data, info.shared_file).is_file(), info.name


def test_medqa_dev(shared_data: Path) -> None:
    bench = load_benchmark("medqa", source=_bench(shared_data, "medqa/dev.jsonl"))
    assert len(bench) == 973
    assert bench.n_skipped == 0
    assert all(q.letters == ["A", "B", "C", "D"] for q in bench.questions)
    assert bench.questions[0].id == "medqa:dev:0"
    assert bench.questions[0].gold_letters == ["D"]


def test_pubmedqa_original_layout_both_variants(shared_data: Path) -> None:
    source = _bench(shared_data, "pubmedqa/pqal_dev.json")
    with_context = load_benchmark("pubmedqa", source=source)
    without = load_benchmark("pubmedqa-noctx", source=source)
    assert len(with_context) == len(without) == 500
    assert all(q.context for q in with_context.questions)
    assert all(q.context is None for q in without.questions)
    assert with_context.questions[0].id == "pubmedqa:10808977"
    assert without.questions[0].id == "pubmedqa-noctx:10808977"


def test_medmcqa_validation_skips_only_duplicate_option_rows(shared_data: Path) -> None:
    bench = load_benchmark("medmcqa", source=_bench(shared_data, "medmcqa/validation.jsonl"))
    assert bench.n_source_rows == 3683
    assert len(bench) + bench.n_skipped == 3683
    assert bench.n_skipped == 19
    assert all("same text" in issue.reason for issue in bench.skipped)
    single = load_benchmark("medmcqa-single", source=_bench(shared_data, "medmcqa/validation.jsonl"))
    assert all(q.metadata["choice_type"] == "single" for q in single.questions)
    assert single.excluded == {"choice_type is unknown, not single": 1195}


def test_mmlu_pro_health(shared_data: Path) -> None:
    bench = load_benchmark("mmlu-pro-health", source=_bench(shared_data, "mmlu_pro/test_health.jsonl"))
    assert len(bench) == 400
    assert bench.n_skipped == 0
    assert max(len(q.letters) for q in bench.questions) == 10
    validation = load_benchmark("mmlu-pro-health", source=_bench(shared_data, "mmlu_pro/validation.jsonl"))
    assert len(validation) == 5
    assert validation.excluded == {"category is not health": 65}
    assert all("N/A" not in (q.options or {}).values() for q in validation.questions)


@pytest.mark.parametrize("task", ["diagnosis", "treatment"])
def test_medrbench(shared_data: Path, task: str) -> None:
    bench = load_benchmark(f"medrbench-{task}", source=_bench(shared_data, f"medrbench/{task}.json"))
    assert len(bench) == 50
    assert bench.n_skipped == 0
    assert all(q.answer_mode == "free_text" and q.gold_text for q in bench.questions)
    assert all(q.id.startswith(f"medrbench-{task}:PMC") for q in bench.questions)
