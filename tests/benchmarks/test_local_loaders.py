"""Every loader on its fixture file (invented rows in the upstream schema)."""

from __future__ import annotations

from pathlib import Path

import pytest

from clearmed.benchmarks import BenchmarkDataError, load_benchmark


def test_medqa(fixtures: Path) -> None:
    bench = load_benchmark("medqa", source=fixtures / "medqa" / "test.jsonl")
    first = bench.questions[0]
    assert [q.id for q in bench.questions] == ["medqa:test:0", "medqa:test:1", "medqa:test:2"]
    assert first.options == {"A": "Zorbanil", "B": "Quextrol", "C": "Plimazine", "D": "Varnocet"}
    assert first.gold_letters == ["A"]
    assert first.answer_mode == "single"
    assert first.metadata["meta_info"] == "step1"
    assert bench.split == "test"
    assert bench.source.endswith("test.jsonl")


@pytest.mark.parametrize("name", ["pubmedqa", "pubmedqa-noctx"])
def test_pubmedqa_hub_row_layout(fixtures: Path, name: str) -> None:
    bench = load_benchmark(name, source=fixtures / "pubmedqa" / "pqa_labeled.jsonl")
    first = bench.questions[0]
    assert first.options == {"A": "yes", "B": "no", "C": "maybe"}
    assert [q.gold_letters for q in bench.questions] == [["A"], ["C"], ["B"]]
    assert first.id == f"{name}:90000001"
    if name == "pubmedqa":
        assert first.context == "BACKGROUND: Fictional background sentence.\n\nRESULTS: Fictional results sentence."
    else:
        assert first.context is None


def test_pubmedqa_original_layout_and_bad_decision(fixtures: Path) -> None:
    source = fixtures / "pubmedqa" / "ori_pqal.json"
    with pytest.raises(BenchmarkDataError, match=r"ori_pqal.json \[90000005\]: final_decision 'probably'"):
        load_benchmark("pubmedqa", source=source)
    bench = load_benchmark("pubmedqa", source=source, on_error="skip")
    assert [q.id for q in bench.questions] == ["pubmedqa:90000004"]
    assert bench.questions[0].context == "OBJECTIVE: Fictional aim.\n\nRESULTS: Fictional finding."
    assert bench.questions[0].metadata["year"] == "2001"
    assert bench.n_skipped == 1


def test_medmcqa_keeps_multi_rows_with_their_one_key(fixtures: Path) -> None:
    bench = load_benchmark("medmcqa", source=fixtures / "medmcqa" / "validation.jsonl")
    by_id = {q.id: q for q in bench.questions}
    assert set(by_id) == {"medmcqa:fake-0001", "medmcqa:fake-0002"}
    assert by_id["medmcqa:fake-0001"].gold_letters == ["B"]
    multi = by_id["medmcqa:fake-0002"]
    assert multi.answer_mode == "single"
    assert multi.gold_letters == ["D"]
    assert multi.metadata["choice_type"] == "multi"
    # Duplicate option texts are an upstream issue: skipped and counted even with on_error="raise".
    assert [issue.reason for issue in bench.skipped] == [
        "unusable upstream row: options A and C have the same text 'Same'"
    ]
    assert bench.excluded == {"unlabelled (cop = -1)": 1}


def test_medmcqa_single_filters_choice_type(fixtures: Path) -> None:
    bench = load_benchmark("medmcqa-single", source=fixtures / "medmcqa" / "validation.jsonl")
    assert [q.id for q in bench.questions] == ["medmcqa:fake-0001"]
    assert bench.excluded["choice_type is multi, not single"] == 1


def test_mmlu_rows_filter_to_medical_subjects(fixtures: Path) -> None:
    source = fixtures / "mmlu" / "medical_rows.jsonl"
    medical = load_benchmark("mmlu-medical", source=source, split="test")
    assert [q.id for q in medical.questions] == ["mmlu:anatomy:test:0", "mmlu:medical_genetics:test:1"]
    assert medical.questions[0].gold_letters == ["C"]
    assert medical.excluded == {"subject astronomy is not in mmlu-medical": 1}
    anatomy = load_benchmark("mmlu-anatomy", source=source, split="test")
    assert [q.metadata["subject"] for q in anatomy.questions] == ["anatomy"]


def test_mmlu_raw_headerless_csv_directory(fixtures: Path) -> None:
    bench = load_benchmark("mmlu-medical", source=fixtures / "mmlu" / "raw")
    assert [q.id for q in bench.questions] == ["mmlu:anatomy:test:0", "mmlu:anatomy:test:1"]
    assert bench.questions[0].text == "FAKE: Which pretend vessel, with a comma?"
    assert bench.questions[0].gold_letters == ["D"]
    dev = load_benchmark("mmlu-anatomy", source=fixtures / "mmlu" / "raw", split="dev")
    assert [q.id for q in dev.questions] == ["mmlu:anatomy:dev:0"]


def test_mmlu_pro_health_drops_padding_and_other_categories(fixtures: Path) -> None:
    source = fixtures / "mmlu_pro" / "test.jsonl"
    with pytest.raises(BenchmarkDataError, match=r"test.jsonl:4: answer A disagrees with answer_index 2"):
        load_benchmark("mmlu-pro-health", source=source)
    bench = load_benchmark("mmlu-pro-health", source=source, on_error="skip")
    first, padded = bench.questions
    assert first.id == "mmlu-pro:99001"
    assert first.letters == list("ABCDEFG")
    assert first.gold_letters == ["E"]
    assert padded.options == {"A": "P", "B": "Q", "C": "R"}
    assert bench.excluded == {"category is not health": 1}


def test_nejm_directory_multi_answers_and_repairs(fixtures: Path) -> None:
    bench = load_benchmark("nejm-qa", source=fixtures / "nejm", on_error="skip")
    by_id = {q.id: q for q in bench.questions}
    multi = by_id["nejm-qa:internal_medicine:0"]
    assert multi.answer_mode == "multi"
    assert multi.gold_letters == ["A", "C"]
    assert multi.text == "FAKE: Which two invented drugs are first line?"
    # one gold letter, the same question format: the mode never comes from the gold
    assert by_id["nejm-qa:general_surgery:1"].answer_mode == "multi"
    assert by_id["nejm-qa:general_surgery:1"].gold_letters == ["B"]
    assert by_id["nejm-qa:general_surgery:0"].options["C"] == "Operate"
    assert by_id["nejm-qa:general_surgery:0"].metadata["repair"] == "option C introduced as 'Third.'"
    assert by_id["nejm-qa:obgyn:0"].options["C"] == "Section"
    assert by_id["nejm-qa:pediatrics:0"].options["C"] == "Antibiotic"
    assert by_id["nejm-qa:psychiatry:0"].options["B"] == "Therapy two continued text"
    reasons = {issue.location.rsplit("/", 1)[1]: issue.reason for issue in bench.skipped}
    assert reasons == {
        "internal_medicine.csv:7": "no 'A.' option line in the question",
        "psychiatry.csv:9": "gold ['E'] is not among the options ['A', 'B', 'C', 'D']",
    }


def test_nejm_one_specialty_from_a_directory_and_a_file(fixtures: Path) -> None:
    one = load_benchmark("nejm-qa", source=fixtures / "nejm", split="obgyn")
    assert [q.id for q in one.questions] == ["nejm-qa:obgyn:0"]
    file = load_benchmark("nejm-qa", source=fixtures / "nejm" / "general_surgery.csv")
    assert [q.metadata["specialty"] for q in file.questions] == ["general_surgery", "general_surgery"]


def test_medbullets_rows_and_raw_upstream_columns(fixtures: Path) -> None:
    bench = load_benchmark("medbullets", source=fixtures / "medbullets" / "op4_test.jsonl")
    assert [q.id for q in bench.questions] == ["medbullets:op4_test:001", "medbullets:op4_test:002"]
    assert bench.questions[0].letters == ["A", "B", "C", "D"]  # the empty E of op4 is padding
    raw = load_benchmark("medbullets", source=fixtures / "medbullets" / "medbullets_op5.json", split="op5_test")
    assert raw.questions[0].letters == ["A", "B", "C", "D", "E"]
    assert raw.questions[0].gold_letters == ["E"]


def test_medexqa_headerless_tsv(fixtures: Path) -> None:
    bench = load_benchmark("medexqa", source=fixtures / "medexqa")
    assert [q.id for q in bench.questions] == [
        "medexqa:biomedical_engineer:test:0",
        "medexqa:biomedical_engineer:test:1",
        "medexqa:speech_pathologist:test:0",
    ]
    first = bench.questions[0]
    assert first.text == "FAKE: Which invented wave does a pretend camera use?"
    assert first.gold_letters == ["D"]
    assert first.metadata == {"specialty": "biomedical_engineer"}
    dev = load_benchmark("medexqa", source=fixtures / "medexqa", split="dev")
    assert [q.id for q in dev.questions] == ["medexqa:speech_pathologist:dev:0"]


def test_afrimedqa_expert_mcq_of_the_chosen_split(fixtures: Path) -> None:
    source = fixtures / "afrimedqa" / "afrimedqa_v2.csv"
    with pytest.raises(BenchmarkDataError, match=r"afrimedqa_v2.csv:7: gold \['C'\] is not among the options"):
        load_benchmark("afrimedqa", source=source)
    bench = load_benchmark("afrimedqa", source=source, on_error="skip")
    single, multi = bench.questions
    assert single.id == "afrimedqa:fa01"
    assert single.letters == ["A", "B", "C", "D"]
    assert single.gold_letters == ["C"]
    assert single.answer_mode == multi.answer_mode == "multi"
    assert multi.gold_letters == ["A", "C"]
    assert bench.excluded == {
        "split column is train, not test": 1,
        "question_type is saq, not mcq": 1,
        "tier is crowdsourced, not expert": 1,
    }
    train = load_benchmark("afrimedqa", source=source, split="train", on_error="skip")
    assert [q.id for q in train.questions] == ["afrimedqa:fa03"]


def test_medrbench_builds_the_question_from_the_case_summary(fixtures: Path) -> None:
    bench = load_benchmark("medrbench-diagnosis", source=fixtures / "medrbench" / "diagnosis.json")
    first = bench.questions[0]
    assert first.id == "medrbench-diagnosis:PMC0000001"
    assert first.answer_mode == "free_text"
    assert first.text.startswith("- **Patient Information:** fictional 40-year-old")
    assert first.text.endswith("what is the final diagnosis?")
    assert "WITH THE ANSWER" not in first.text  # raw_case holds the answer and is never loaded
    assert first.gold_text == "Pretend-itis of the imaginary gland"
    assert first.metadata["rare_disease"] is True
    assert first.metadata["task"] == "diagnosis"
    assert bench.questions[1].metadata["rare_disease"] is False


def test_healthbench_conversation_and_rubric(fixtures: Path) -> None:
    bench = load_benchmark("healthbench-hard", source=fixtures / "healthbench" / "hard.jsonl")
    first, second = bench.questions
    assert first.id == "healthbench:00000000-fake-0000-0000-000000000001"
    assert first.answer_mode == "free_text"
    assert first.options is None
    assert first.text == "FAKE: my pretend knee clicks, tell me the exact cause"
    assert [item.points for item in first.rubric or []] == [7, -8, 5]
    assert first.rubric
    assert first.rubric[1].tags == ["level:example", "axis:accuracy"]
    assert first.gold_text == "FAKE ideal reply."
    assert first.metadata["example_tags"] == ["theme:hedging"]
    assert [turn.role for turn in second.conversation or []] == ["system", "user", "assistant", "user"]
    assert second.text == "FAKE follow-up question"
    assert second.gold_text is None


def test_parquet_rows_read_like_the_hub(fixtures: Path, tmp_path: Path) -> None:
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [json.loads(line) for line in (fixtures / "pubmedqa" / "pqa_labeled.jsonl").read_text().splitlines()]
    path = tmp_path / "train-00000-of-00001.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    bench = load_benchmark("pubmedqa", source=path, split="train")
    assert [q.id for q in bench.questions] == ["pubmedqa:90000001", "pubmedqa:90000002", "pubmedqa:90000003"]
    assert bench.questions[0].context is not None
    assert bench.questions[0].context.startswith("BACKGROUND: Fictional background")
