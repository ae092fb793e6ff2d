"""Bad input: malformed questions, options and gold; oversized questions; broken bytes and lines in files.

Every case must end in one clear message (exit code 2 from the command line, no traceback) or a clean,
recorded outcome; nothing else may be lost.
"""

from __future__ import annotations

import json
from pathlib import Path

import pydantic
import pytest

from clearmed.api import assemble
from clearmed.benchmarks import BenchmarkError, load_benchmark
from clearmed.cli.main import main
from clearmed.retrieval.corpus import CorpusError, FieldMapping, IngestStats, read_jsonl
from clearmed.signatures.records import Question
from clearmed.testing import QUESTION, build_toy_program, label_all, pathway_replies, scripted_lm, verifier_reply

pytestmark = pytest.mark.reliability

CATEGORY = "bad input"
CONTROL = "\x00\x07\x1b[2J\x1b]0;pwned\x07\x08\u202e\u200b"

MEDQA_ROW = {
    "question": "Which hormone is deficient in Addison disease?",
    "answer": "Cortisol",
    "options": {"A": "Cortisol", "B": "Insulin", "C": "Thyroxine", "D": "Growth hormone"},
    "answer_idx": "A",
    "meta_info": "step1",
}


def scripted_script() -> dict[str, object]:
    def answer(call):
        cited = {"cited_ids": []} if "evidence" in call.user else {}
        return {"rationale": "because", **cited, "answer": "A"}

    return {
        "parametric": answer,
        "local_answer": answer,
        "dynamic_answer": answer,
        "source_quality": label_all("high"),
        "verifier": verifier_reply("consensus"),
        "response": {"response": "An answer."},
    }


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch):
    lm, engine = scripted_lm(scripted_script())
    monkeypatch.setattr(assemble, "build_role_lms", lambda config, roles=("main", "assessor"): {"main": lm})
    return engine


def clean_exit(code: int, err: str, *, expect: str | None = None) -> None:
    """Exit code 2, one line starting with clearmed: error:, no traceback."""
    assert code == 2, err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("clearmed: error:"), err
    if expect is not None:
        assert expect in lines[0], err


# --------------------------------------------------------------------------------------------- questions (library)


@pytest.mark.parametrize(
    ("name", "fields", "message"),
    [
        ("empty question", {"text": ""}, "question text is empty"),
        ("whitespace question", {"text": " \n\t  "}, "question text is empty"),
        ("control characters only", {"text": "\x00\x1b\x07"}, "question text is empty"),
        ("options missing for an MCQ", {"options": None}, "at least two options"),
        ("one option only", {"options": {"A": "Cortisol"}}, "at least two options"),
        ("duplicated option texts", {"options": {"A": "Cortisol", "B": " cortisol "}}, "same text"),
        ("non-letter option keys", {"options": {"1": "Cortisol", "2": "Insulin"}}, "single capital letters"),
        ("lower-case option keys", {"options": {"a": "Cortisol", "b": "Insulin"}}, "single capital letters"),
        ("blank option text", {"options": {"A": "Cortisol", "B": "  "}}, "empty text"),
        ("gold not among the options", {"gold_letters": ["E"]}, "not among the options"),
        ("two golds for a single answer", {"gold_letters": ["A", "B"]}, "exactly one gold letter"),
        ("options on a free-text question", {"answer_mode": "free_text", "gold_letters": None}, "cannot have options"),
    ],
)
def test_malformed_questions_are_refused_clearly(reliability, name: str, fields: dict, message: str) -> None:
    with reliability.case(CATEGORY, f"library: {name}"):
        base = {
            "id": "q",
            "text": "Which hormone is deficient in Addison disease?",
            "options": {"A": "Cortisol", "B": "Insulin"},
            "gold_letters": ["A"],
        }
        with pytest.raises(pydantic.ValidationError) as info:
            Question(**{**base, **fields})
        assert message in str(info.value)


def test_control_characters_are_removed_from_question_fields(reliability) -> None:
    with reliability.case(CATEGORY, "library: control characters in question, options and context"):
        question = Question(
            id="q",
            text=f"Which hormone{CONTROL} is deficient\r\nin Addison disease?",
            options={"A": f"Cortisol{CONTROL}", "B": "Insulin"},
            context=f"An abstract{CONTROL}.",
        )
        for value in (question.text, question.options["A"], question.context):  # type: ignore[index]
            assert value is not None
            assert not any(ord(ch) < 32 and ch not in "\n\t" for ch in value), repr(value)
            assert "\u202e" not in value
            assert "\u200b" not in value
        assert question.text == "Which hormone[2J]0;pwned is deficient\nin Addison disease?"


def test_an_oversized_question_is_refused_before_any_lm_call(reliability) -> None:
    with reliability.case(CATEGORY, "library: question far over the context budget"):
        program, engine, _ = build_toy_program(
            {
                **pathway_replies("A", "A", "A"),
                "source_quality": label_all("high"),
                "verifier": verifier_reply("consensus"),
            }
        )
        huge = QUESTION.model_copy(update={"text": "weight gain and cold intolerance " * 6000})
        decision = program(question=huge).decision
        assert decision.status == "failed"
        assert decision.error is not None
        assert "words" in decision.error
        assert "budget" in decision.error
        assert engine.calls == []  # refused before any model call
        assert decision.steps
        assert decision.steps[0].rule == "input_over_budget"


# --------------------------------------------------------------------------------------------- questions (CLI)


@pytest.mark.parametrize(
    ("name", "argv", "message"),
    [
        ("empty question", ["ask", ""], "give a question"),
        ("whitespace question", ["ask", "   \t"], "question text is empty"),
        ("one option", ["ask", "Which?", "-o", "A: x"], "at least two --option"),
        ("duplicated option letter", ["ask", "Which?", "-o", "A: x", "-o", "A: y"], "given twice"),
        ("duplicated option text", ["ask", "Which?", "-o", "A: x", "-o", "B: X"], "same text"),
        ("blank option", ["ask", "Which?", "-o", "A: x", "-o", "B:   "], "empty"),
    ],
)
def test_cli_bad_questions_are_one_clear_line(
    reliability, scripted, capsys: pytest.CaptureFixture[str], name: str, argv: list[str], message: str
) -> None:
    with reliability.case(CATEGORY, f"cli ask: {name}"):
        code = main(argv)
        clean_exit(code, capsys.readouterr().err, expect=message)
        assert scripted.calls == []


def test_cli_oversized_question_is_refused(reliability, scripted, capsys: pytest.CaptureFixture[str]) -> None:
    with reliability.case(CATEGORY, "cli ask: question far over the context budget"):
        code = main(["ask", "cold intolerance " * 6000, "-o", "A: x", "-o", "B: y"])
        clean_exit(code, capsys.readouterr().err, expect="words")
        assert scripted.calls == []


def test_cli_control_characters_never_reach_the_terminal(
    reliability, scripted, capsys: pytest.CaptureFixture[str]
) -> None:
    with reliability.case(CATEGORY, "cli ask: control characters in the question and options"):
        code = main(["ask", f"Which hormone{CONTROL} is low?", "-o", f"A: cortisol{CONTROL}", "-o", "B: insulin"])
        captured = capsys.readouterr()
        assert code == 0, captured.err
        for stream in (captured.out, captured.err):
            assert "\x1b]0;pwned" not in stream
            assert "\x1b[2J" not in stream
            assert "\x00" not in stream
            assert "\u202e" not in stream


# --------------------------------------------------------------------------------------------- files


def write_lines(path: Path, lines: list[bytes]) -> Path:
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path


def good_row(**changes: object) -> bytes:
    return json.dumps({**MEDQA_ROW, **changes}).encode()


def test_benchmark_malformed_json_line_names_file_and_line(reliability, tmp_path: Path) -> None:
    with reliability.case(CATEGORY, "benchmark file: malformed JSON line"):
        path = write_lines(tmp_path / "bad.jsonl", [good_row(), b'{"question": "cut off', good_row()])
        with pytest.raises(BenchmarkError, match=rf"{path.name}:2: malformed JSON"):
            load_benchmark("medqa", source=path)
        loaded = load_benchmark("medqa", source=path, on_error="skip")
        assert len(loaded.questions) == 2
        assert loaded.n_skipped == 1


def test_benchmark_non_utf8_bytes_name_file_and_line(reliability, tmp_path: Path) -> None:
    with reliability.case(CATEGORY, "benchmark file: non-UTF-8 bytes"):
        broken = good_row(question="Which hormone is low in Addison\xff disease?").replace(b"\\u00ff", b"\xff")
        path = write_lines(tmp_path / "latin1.jsonl", [good_row(), broken])
        with pytest.raises(BenchmarkError, match=rf"{path.name}:2: .*UTF-8"):
            load_benchmark("medqa", source=path)
        loaded = load_benchmark("medqa", source=path, on_error="skip")
        assert len(loaded.questions) == 1
        assert loaded.n_skipped == 1


def test_benchmark_non_utf8_csv_is_a_clear_error(reliability, tmp_path: Path) -> None:
    with reliability.case(CATEGORY, "benchmark file: non-UTF-8 CSV"):
        path = tmp_path / "afrimed.csv"
        path.write_bytes(b"question,answer\nwhich\xff hormone,a\n")
        with pytest.raises(BenchmarkError, match=r"afrimed.csv.*UTF-8"):
            load_benchmark("afrimedqa", source=path)


def test_benchmark_control_characters_are_cleaned(reliability, tmp_path: Path) -> None:
    with reliability.case(CATEGORY, "benchmark file: control characters in a row"):
        row = good_row(question=f"Which hormone{CONTROL} is low in Addison disease?")
        path = write_lines(tmp_path / "control.jsonl", [row])
        (question,) = load_benchmark("medqa", source=path).questions
        assert "\x1b" not in question.text
        assert "\x00" not in question.text


def test_benchmark_gold_not_among_options_names_the_line(reliability, tmp_path: Path) -> None:
    with reliability.case(CATEGORY, "benchmark file: gold not among the options"):
        path = write_lines(tmp_path / "gold.jsonl", [good_row(), good_row(answer_idx="E", answer=None)])
        with pytest.raises(BenchmarkError, match=rf"{path.name}:2:"):
            load_benchmark("medqa", source=path)


def test_cli_eval_bad_benchmark_line_is_one_clear_line(
    reliability, scripted, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with reliability.case(CATEGORY, "cli eval: malformed benchmark line"):
        path = write_lines(tmp_path / "bad.jsonl", [good_row(), b"{not json", good_row(question="Second one?")])
        code = main(["eval", "--benchmark", "medqa", "--source", str(path), "--run-dir", str(tmp_path / "run")])
        clean_exit(code, capsys.readouterr().err, expect=f"{path.name}:2")
        assert not (tmp_path / "run" / "results.jsonl").exists()


def test_cli_eval_non_utf8_benchmark_is_one_clear_line(
    reliability, scripted, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with reliability.case(CATEGORY, "cli eval: non-UTF-8 benchmark file"):
        path = write_lines(tmp_path / "bad.jsonl", [good_row(), b'{"question": "caf\xe9"}'])
        code = main(["eval", "--benchmark", "medqa", "--source", str(path), "--run-dir", str(tmp_path / "run")])
        clean_exit(code, capsys.readouterr().err, expect=f"{path.name}:2")


def test_cli_eval_can_skip_and_count_bad_lines(
    reliability, scripted, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with reliability.case(CATEGORY, "cli eval --skip-bad-rows: bad lines skipped and counted"):
        path = write_lines(
            tmp_path / "bad.jsonl",
            [good_row(), b"{not json", b'{"question": "caf\xe9"}', good_row(question="Second one?")],
        )
        run_dir = tmp_path / "run"
        argv = ["eval", "--benchmark", "medqa", "--source", str(path), "--run-dir", str(run_dir), "--skip-bad-rows"]
        code = main(argv)
        err = capsys.readouterr().err
        assert code == 0, err
        assert "2 malformed rows skipped" in err
        assert "Traceback" not in err
        assert len((run_dir / "results.jsonl").read_text().splitlines()) == 2


def test_corpus_malformed_and_non_utf8_lines_name_file_and_line(reliability, tmp_path: Path) -> None:
    with reliability.case(CATEGORY, "corpus file: malformed JSON and non-UTF-8 lines"):
        path = write_lines(
            tmp_path / "corpus.jsonl",
            [
                b'{"id": "d1", "title": "T", "text": "Cortisol is low in Addison disease."}',
                b'{"id": "d2", "title": "T", "text": "cut',
                b'{"id": "d3", "title": "T", "text": "caf\xe9"}',
                b'{"id": "d4", "title": "T", "text": "Insulin is made by beta cells."}',
            ],
        )
        with pytest.raises(CorpusError, match=rf"{path.name}:2: malformed JSON"):
            list(read_jsonl(path, FieldMapping()))
        stats = IngestStats()
        passages = list(read_jsonl(path, FieldMapping(), on_error="skip", stats=stats))
        assert [p.id for p in passages] == ["d1", "d4"]
        assert stats.skipped == 2
        assert any(":3: not valid UTF-8" in problem for problem in stats.problems)


def test_corpus_control_characters_are_cleaned(reliability, tmp_path: Path) -> None:
    with reliability.case(CATEGORY, "corpus file: control characters in passages"):
        row = {"id": "d1", "title": f"Adrenal{CONTROL}", "text": f"Cortisol{CONTROL} is low in Addison disease."}
        path = write_lines(tmp_path / "corpus.jsonl", [json.dumps(row).encode()])
        (passage,) = list(read_jsonl(path, FieldMapping()))
        for value in (passage.title, passage.text):
            assert not any(ord(ch) < 32 and ch not in "\n\t" for ch in value), repr(value)


def write_config(tmp_path: Path, corpus: Path) -> Path:
    demo = Path(__file__).resolve().parents[2] / "demo"
    config = tmp_path / "bad-corpus.toml"
    config.write_text(
        f"""
[backbones.main]
kind = "openai_compatible"
model = "m"
api_base = "http://127.0.0.1:9/v1"

[corpus]
backend = "bm25s"
path = "{corpus}"
fields = {{ id = "id", title = "title", text = "text" }}

[search]
backend = "offline"
pages = "{demo / "web_pages.jsonl"}"
fields = {{ id = "id", title = "title", text = "text", url = "url", date = "published" }}
""",
        encoding="utf-8",
    )
    return config


def test_cli_ask_with_a_broken_corpus_is_one_clear_line(
    reliability, scripted, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with reliability.case(CATEGORY, "cli ask: corpus with a malformed line"):
        corpus = write_lines(tmp_path / "corpus.jsonl", [b'{"id": "d1", "title": "T", "text": "ok"}', b"{oops"])
        config = write_config(tmp_path, corpus)
        code = main(["ask", "Which hormone?", "-o", "A: x", "-o", "B: y", "-c", str(config)])
        clean_exit(code, capsys.readouterr().err, expect=f"{corpus.name}:2")


def test_cli_config_that_is_not_utf8_is_one_clear_line(reliability, tmp_path: Path, capsys) -> None:
    with reliability.case(CATEGORY, "cli: config file that is not UTF-8"):
        config = tmp_path / "latin1.toml"
        config.write_bytes(b'[backbones.main]\nkind = "embedded"\nmodel = "caf\xe9"\n')
        code = main(["config", "-c", str(config)])
        clean_exit(code, capsys.readouterr().err, expect="latin1.toml")


def test_cli_markup_in_questions_and_evidence_is_shown_as_text(
    reliability, scripted, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with reliability.case(CATEGORY, "cli ask: terminal markup in the question and in a web page"):
        markup = "[/bold] [link=https://evil.example]click[/link] [red]"
        demo = Path(__file__).resolve().parents[2] / "demo"
        pages = tmp_path / "pages.jsonl"
        page = {
            "id": "p1",
            "title": f"Thyroid {markup}",
            "text": f"Which hormone is low? Cortisol is low in Addison disease {markup}",
            "url": "https://www.niddk.nih.gov/addison",
            "published": "2024-01-01",
        }
        pages.write_text(json.dumps(page) + "\n", encoding="utf-8")
        config = write_config(tmp_path, demo / "textbook.jsonl")
        config.write_text(config.read_text().replace(str(demo / "web_pages.jsonl"), str(pages)), encoding="utf-8")
        code = main(
            ["ask", f"Which hormone is low {markup}?", "-o", "A: cortisol [/]", "-o", "B: insulin", "-c", str(config)]
        )
        captured = capsys.readouterr()
        assert code == 0, captured.err
        assert "[/bold]" in captured.out  # shown literally, not interpreted
        assert "Traceback" not in captured.err
