"""The hub path: `datasets.load_dataset` is replaced by a fake that checks what we ask for and serves the
fixture files (plain-file repos go through the real json/csv builder on local copies)."""

from __future__ import annotations

from pathlib import Path

import pytest

from clearmed.benchmarks import BenchmarkSourceError, load_benchmark


def test_medqa_reads_the_jsonl_file_with_the_json_builder(fake_hub, fixtures: Path) -> None:
    remote = "hf://datasets/GBaker/MedQA-USMLE-4-options/phrases_no_exclude_test.jsonl"
    fake_hub.files[remote] = fixtures / "medqa" / "test.jsonl"
    bench = load_benchmark("medqa")
    assert fake_hub.calls[0][0] == ("json",)
    assert fake_hub.calls[0][1]["data_files"] == remote
    assert fake_hub.calls[0][1]["split"] == "train"
    assert [q.id for q in bench.questions] == ["medqa:test:0", "medqa:test:1", "medqa:test:2"]
    # The json builder turns the options dict into a struct; the parser still sees four options.
    assert bench.questions[2].options == {
        "A": "Alpha-fakease",
        "B": "Beta-fakease",
        "C": "Gamma-fakease",
        "D": "Delta-fakease",
    }
    assert bench.source == f"hub {remote} split train"


def test_pubmedqa_uses_the_pqa_labeled_config(fake_hub, fixtures: Path) -> None:
    fake_hub.add_rows("qiaojin/PubMedQA", "pqa_labeled", "train", fixtures / "pubmedqa" / "pqa_labeled.jsonl")
    bench = load_benchmark("pubmedqa-noctx", limit=2, seed=0)
    assert fake_hub.calls == [(("qiaojin/PubMedQA", "pqa_labeled"), {"split": "train"})]
    assert len(bench) == 2
    assert all(q.context is None for q in bench.questions)


def test_medmcqa_split(fake_hub, fixtures: Path) -> None:
    fake_hub.add_rows("openlifescienceai/medmcqa", None, "validation", fixtures / "medmcqa" / "validation.jsonl")
    bench = load_benchmark("medmcqa")
    assert fake_hub.calls == [(("openlifescienceai/medmcqa",), {"split": "validation"})]
    assert [q.id for q in bench.questions] == ["medmcqa:fake-0001", "medmcqa:fake-0002"]


def test_mmlu_medical_loads_one_config_per_subject(fake_hub, fixtures: Path) -> None:
    rows = fixtures / "mmlu" / "medical_rows.jsonl"
    subjects = [
        "anatomy",
        "clinical_knowledge",
        "college_biology",
        "college_medicine",
        "medical_genetics",
        "professional_medicine",
    ]
    for subject in subjects:
        fake_hub.add_rows("cais/mmlu", subject, "test", rows)
        fake_hub.datasets_by_id[("cais/mmlu", subject, "test")] = [
            row for row in fake_hub.datasets_by_id[("cais/mmlu", subject, "test")] if row["subject"] == subject
        ]
    bench = load_benchmark("mmlu-medical")
    assert [call[0] for call in fake_hub.calls] == [("cais/mmlu", subject) for subject in subjects]
    assert [q.id for q in bench.questions] == ["mmlu:anatomy:test:0", "mmlu:medical_genetics:test:0"]


def test_mmlu_pro_filters_health(fake_hub, fixtures: Path) -> None:
    fake_hub.add_rows("TIGER-Lab/MMLU-Pro", None, "test", fixtures / "mmlu_pro" / "test.jsonl")
    bench = load_benchmark("mmlu-pro-health", on_error="skip")
    assert fake_hub.calls == [(("TIGER-Lab/MMLU-Pro",), {"split": "test"})]
    assert [q.id for q in bench.questions] == ["mmlu-pro:99001", "mmlu-pro:99002"]
    assert bench.excluded == {"category is not health": 1}


def test_nejm_reads_each_specialty_csv(fake_hub, fixtures: Path) -> None:
    for name in ["general_surgery", "internal_medicine", "obgyn", "pediatrics", "psychiatry"]:
        fake_hub.files[f"hf://datasets/nejm-ai-qa/exams/{name}.csv"] = fixtures / "nejm" / f"{name}.csv"
    bench = load_benchmark("nejm-qa", on_error="skip")
    assert len(fake_hub.calls) == 5
    assert all(call[0] == ("csv",) for call in fake_hub.calls)
    assert {q.id for q in bench.questions} >= {"nejm-qa:internal_medicine:0", "nejm-qa:obgyn:0"}
    assert bench.n_skipped == 2
    one = load_benchmark("nejm-qa", split="obgyn")
    assert fake_hub.calls[-1][1]["data_files"] == "hf://datasets/nejm-ai-qa/exams/obgyn.csv"
    assert [q.id for q in one.questions] == ["nejm-qa:obgyn:0"]


def test_medbullets_split(fake_hub, fixtures: Path) -> None:
    fake_hub.add_rows("mkieffer/Medbullets", None, "op4_test", fixtures / "medbullets" / "op4_test.jsonl")
    bench = load_benchmark("medbullets")
    assert fake_hub.calls == [(("mkieffer/Medbullets",), {"split": "op4_test"})]
    assert bench.questions[0].id == "medbullets:op4_test:001"
    assert bench.questions[0].letters == ["A", "B", "C", "D"]


def test_medexqa_reads_headerless_tsv_with_the_csv_builder(fake_hub, fixtures: Path) -> None:
    names = [
        "biomedical_engineer",
        "clinical_laboratory_scientist",
        "clinical_psychologist",
        "occupational_therapist",
        "speech_pathologist",
    ]
    for name in names:
        source = fixtures / "medexqa" / "test" / f"{name}_test.tsv"
        if not source.exists():
            source = fixtures / "medexqa" / "test" / "speech_pathologist_test.tsv"
        fake_hub.files[f"hf://datasets/bluesky333/MedExQA/test/{name}_test.tsv"] = source
    bench = load_benchmark("medexqa")
    args, kwargs = fake_hub.calls[0]
    assert args == ("csv",)
    assert kwargs["sep"] == "\t"
    assert kwargs["header"] is None
    assert kwargs["column_names"] == ["question", "A", "B", "C", "D", "exp0", "exp1", "answer"]
    # Without header=None the first question would have become the header: both rows must be there.
    assert [q.id for q in bench.questions][:2] == [
        "medexqa:biomedical_engineer:test:0",
        "medexqa:biomedical_engineer:test:1",
    ]
    assert len(bench) == 6


def test_afrimedqa_reads_the_gated_dataset(fake_hub, fixtures: Path) -> None:
    import csv

    with (fixtures / "afrimedqa" / "afrimedqa_v2.csv").open(newline="") as handle:
        fake_hub.datasets_by_id[("intronhealth/afrimedqa_v2", None, "train")] = list(csv.DictReader(handle))
    bench = load_benchmark("afrimedqa", on_error="skip")
    assert fake_hub.calls == [(("intronhealth/afrimedqa_v2",), {"split": "train"})]
    assert [q.id for q in bench.questions] == ["afrimedqa:fa01", "afrimedqa:fa02"]
    assert bench.split == "test"


def test_healthbench_hard_file(fake_hub, fixtures: Path) -> None:
    remote = "hf://datasets/openai/healthbench/hard_2025-05-08-21-00-10.jsonl"
    fake_hub.files[remote] = fixtures / "healthbench" / "hard.jsonl"
    bench = load_benchmark("healthbench-hard")
    assert fake_hub.calls[0][0] == ("json",)
    assert fake_hub.calls[0][1]["data_files"] == remote
    first = bench.questions[0]
    assert first.rubric
    assert [item.points for item in first.rubric] == [7, -8, 5]
    assert bench.questions[1].gold_text is None  # ideal_completions_data is null in the second record


def test_hub_failure_becomes_a_clear_error(fake_hub) -> None:
    fake_hub.error = ConnectionError("Couldn't reach 'GBaker/MedQA-USMLE-4-options' on the Hub (OfflineModeIsEnabled)")
    with pytest.raises(BenchmarkSourceError, match=r"could not load hub .*ConnectionError.*source=<local file>"):
        load_benchmark("medqa")
