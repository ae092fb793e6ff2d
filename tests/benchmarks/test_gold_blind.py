"""The prompt never depends on the gold (issue 25).

For every registered benchmark, a source file of two rows that differ only in their gold (and in whatever
upstream field is written from the gold: explanations, rationales, the conclusion, the raw case) loads as two
questions the pathways see identically: the same question text, options, answer mode, instruction and rendered
prompt. The answer mode is the benchmark's question format (`BenchmarkInfo.answer_mode`), never the row's gold.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from pathlib import Path

import dspy
import pytest

from clearmed.benchmarks import BenchmarkDataError, available_benchmarks, benchmark_info, load_benchmark
from clearmed.programs.lm.parsing import answer_format, format_options
from clearmed.programs.lm.prompting import render_question
from clearmed.signatures.clear import AnswerFromKnowledge
from clearmed.signatures.records import Question

STEM = "FAKE: Which invented drugs are first line for pretend fever?"
TEXTS = ["Zorbanil", "Quextrol", "Plimazine", "Varnocet", "Fendrax"]
OPTIONS = dict(zip("ABCDE", TEXTS, strict=True))

# Everything of a Question that is not the gold, its id, or bookkeeping nobody renders into a prompt.
NOT_SHOWN = {"id", "gold_letters", "gold_text", "metadata"}


def prompt_of(question: Question) -> list[object]:
    """What the parametric pathway sends: its inputs and the chat prompt DSPy renders from them."""
    inputs = {
        "question": render_question(question),
        "options": format_options(question),
        "answer_format": answer_format(question),
    }
    return [
        inputs,
        dspy.ChatAdapter().format(AnswerFromKnowledge, demos=[], inputs=inputs),
    ]


def _jsonl(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def _csv(path: Path, rows: list[dict[str, object]]) -> Path:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def _tsv(path: Path, rows: list[list[str]]) -> Path:
    path.write_text("".join("\t".join(row) + "\n" for row in rows))
    return path


# name -> (writer of a two-row source file in tmp_path from the two golds, the two golds). Each row builder
# also writes every gold-derived upstream field the schema has, so none of them may reach the prompt either.
Writer = Callable[[Path, tuple[object, object]], Path]


def _medqa(tmp: Path, golds: tuple[object, object]) -> Path:
    rows = [
        {
            "question": STEM,
            "options": dict(zip("ABCD", TEXTS, strict=False)),
            "answer_idx": g,
            "answer": OPTIONS[str(g)],
        }
        for g in golds
    ]
    return _jsonl(tmp / "test.jsonl", rows)


def _pubmedqa(tmp: Path, golds: tuple[object, object]) -> Path:
    rows = [
        {
            "pubid": 1000 + i,
            "question": STEM,
            "context": {"contexts": ["Invented background."], "labels": ["BACKGROUND"]},
            "long_answer": f"The conclusion is {g}.",
            "final_decision": g,
        }
        for i, g in enumerate(golds)
    ]
    return _jsonl(tmp / "pqa.jsonl", rows)


def _medmcqa(tmp: Path, golds: tuple[object, object]) -> Path:
    rows = [
        {
            "id": f"m{i}",
            "question": STEM,
            **dict(zip(("opa", "opb", "opc", "opd"), TEXTS, strict=False)),
            "cop": g,
            "choice_type": "single",
            "exp": f"Option {g} is right.",
        }
        for i, g in enumerate(golds)
    ]
    return _jsonl(tmp / "validation.jsonl", rows)


def _mmlu(subject: str) -> Writer:
    def write(tmp: Path, golds: tuple[object, object]) -> Path:
        rows = [{"question": STEM, "subject": subject, "choices": TEXTS[:4], "answer": g} for g in golds]
        return _jsonl(tmp / "mmlu.jsonl", rows)

    return write


def _mmlu_pro(tmp: Path, golds: tuple[object, object]) -> Path:
    rows = [
        {
            "question_id": 10 + i,
            "question": STEM,
            "options": TEXTS,
            "answer": g,
            "answer_index": "ABCDE".index(str(g)),
            "cot_content": f"The answer is ({g}).",
            "category": "health",
        }
        for i, g in enumerate(golds)
    ]
    return _jsonl(tmp / "test.jsonl", rows)


def _medbullets(tmp: Path, golds: tuple[object, object]) -> Path:
    rows = [
        {"idx": f"00{i}", "question": STEM, "options": OPTIONS, "answer": g, "explanation": f"{g} because."}
        for i, g in enumerate(golds)
    ]
    return _jsonl(tmp / "op5_test.jsonl", rows)


def _nejm(tmp: Path, golds: tuple[object, object]) -> Path:
    question = STEM + "".join(f"\n{letter}. {text}" for letter, text in zip("ABCD", TEXTS, strict=False))
    return _csv(tmp / "internal_medicine.csv", [{"question": question, "answer": g} for g in golds])


def _afrimedqa(tmp: Path, golds: tuple[object, object]) -> Path:
    options = json.dumps({f"option{i + 1}": text for i, text in enumerate(TEXTS[:4])} | {"option5": "N/A"})
    rows = [
        {
            "sample_id": f"s{i}",
            "question_type": "mcq",
            "question": STEM,
            "answer_options": options,
            "correct_answer": g,
            "answer_rationale": f"{g} is right.",
            "tier": "expert",
            "split": "test",
        }
        for i, g in enumerate(golds)
    ]
    return _csv(tmp / "afrimedqa_v2.csv", rows)


def _medexqa(tmp: Path, golds: tuple[object, object]) -> Path:
    rows = [[STEM, *TEXTS[:4], f"{g} explained.", f"{g} again.", str(g)] for g in golds]
    return _tsv(tmp / "biomedical_engineer_test.tsv", rows)


def _medrbench(gold_field: str) -> Writer:
    def write(tmp: Path, golds: tuple[object, object]) -> Path:
        document = {
            f"PMC{i}": {
                "raw_case": f"Case report: the patient had {g}.",
                "generate_case": {"case_summary": STEM, gold_field: g, "final_diagnosis": f"It was {g}."},
            }
            for i, g in enumerate(golds)
        }
        path = tmp / "cases.json"
        path.write_text(json.dumps(document))
        return path

    return write


def _healthbench(tmp: Path, golds: tuple[object, object]) -> Path:
    rows = [
        {
            "prompt": [{"role": "user", "content": STEM}],
            "prompt_id": f"p{i}",
            "rubrics": [{"criterion": "Names the drug.", "points": 5, "tags": []}],
            "example_tags": [],
            "ideal_completions_data": {"ideal_completion": g},
        }
        for i, g in enumerate(golds)
    ]
    return _jsonl(tmp / "hard.jsonl", rows)


def _mirage(subset: str) -> Writer:
    def write(tmp: Path, golds: tuple[object, object]) -> Path:
        options = dict(zip("ABCD", TEXTS[:4], strict=True))
        document = {
            subset: {f"{i:04d}": {"question": STEM, "options": options, "answer": g} for i, g in enumerate(golds)}
        }
        path = tmp / "benchmark.json"
        path.write_text(json.dumps(document))
        return path

    return write


SINGLE_LETTERS = ("A", "C")
SOURCES: dict[str, tuple[Writer, tuple[object, object]]] = {
    "medqa": (_medqa, SINGLE_LETTERS),
    "pubmedqa": (_pubmedqa, ("yes", "no")),
    "pubmedqa-noctx": (_pubmedqa, ("yes", "maybe")),
    "medmcqa": (_medmcqa, (0, 2)),
    "medmcqa-single": (_medmcqa, (0, 2)),
    "mmlu-medical": (_mmlu("anatomy"), (0, 2)),
    **{
        f"mmlu-{subject}": (_mmlu(subject.replace("-", "_")), (0, 2))
        for subject in (
            "anatomy",
            "clinical-knowledge",
            "college-biology",
            "college-medicine",
            "medical-genetics",
            "professional-medicine",
        )
    },
    "mmlu-pro-health": (_mmlu_pro, SINGLE_LETTERS),
    "medbullets": (_medbullets, ("A", "E")),
    # The three benchmarks whose answer mode was read from the gold: one gold letter against several.
    "nejm-qa": (_nejm, ("A", "A,C")),
    "afrimedqa": (_afrimedqa, ("option1", "option1,option3")),
    "medexqa": (_medexqa, ("A", "D")),
    "medrbench-diagnosis": (_medrbench("diagnosis_results"), ("Invented fever", "Pretend pox")),
    "medrbench-treatment": (_medrbench("treatment_plan_results"), ("Zorbanil", "Rest")),
    **{name: (_healthbench, ("Take Zorbanil.", "See a doctor.")) for name in ("healthbench", "healthbench-hard")},
    "healthbench-consensus": (_healthbench, ("Rest.", "Fluids.")),
    **{
        f"mirage-{subset}": (_mirage(subset), SINGLE_LETTERS)
        for subset in ("mmlu", "medqa", "medmcqa", "pubmedqa", "bioasq")
    },
}


def test_every_registered_benchmark_is_covered() -> None:
    assert set(SOURCES) == {info.name for info in available_benchmarks()}


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_two_rows_differing_only_in_gold_give_the_same_prompt(name: str, tmp_path: Path) -> None:
    write, golds = SOURCES[name]
    first, second = load_benchmark(name, source=write(tmp_path, golds)).questions
    assert (first.gold_letters, first.gold_text) != (second.gold_letters, second.gold_text)
    assert first.model_dump(exclude=NOT_SHOWN) == second.model_dump(exclude=NOT_SHOWN)
    assert first.answer_mode == second.answer_mode == benchmark_info(name).answer_mode
    assert prompt_of(first) == prompt_of(second)


@pytest.mark.parametrize(("name", "golds"), [("nejm-qa", (["A"], ["A", "C"])), ("afrimedqa", (["A"], ["A", "C"]))])
def test_a_benchmark_with_several_answers_asks_one_or_more_for_every_question(
    name: str, golds: tuple[list[str], list[str]], tmp_path: Path
) -> None:
    write, raw = SOURCES[name]
    questions = load_benchmark(name, source=write(tmp_path, raw)).questions
    assert [q.gold_letters for q in questions] == list(golds)
    assert {q.answer_mode for q in questions} == {"multi"}
    assert {answer_format(q) for q in questions} == {"choose every correct option letter (one or more)"}


def test_medexqa_has_one_answer_per_question(tmp_path: Path) -> None:
    """MedExQA's authors ask for "the most suitable one" and score one letter: several gold letters are a
    malformed row, not a multi-answer question."""
    source = _medexqa(tmp_path, ("A", "A,C"))
    with pytest.raises(BenchmarkDataError, match=r"test.tsv:2: a single-answer question needs exactly one gold"):
        load_benchmark("medexqa", source=source)
    bench = load_benchmark("medexqa", source=source, on_error="skip")
    assert [q.answer_mode for q in bench.questions] == ["single"]
    assert bench.n_skipped == 1
