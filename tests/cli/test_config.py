"""The composed project config: packaged configs validate; errors are one line naming file and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from clearmed.backbones.errors import ConfigError
from clearmed.config import load_config, packaged_configs

MINIMAL = """
[backbones.main]
kind = "openai_compatible"
model = "m"
api_base = "http://127.0.0.1:9/v1"
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "c.toml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("name", sorted(packaged_configs()))
def test_every_packaged_config_validates(name: str) -> None:
    config = load_config(name)
    assert "main" in config.backbones


@pytest.mark.parametrize("name", sorted(packaged_configs()))
def test_every_packaged_config_judges_free_text_agreement_with_the_lm(name: str) -> None:
    program = load_config(name).program
    assert program.agreement_mode == "lm"
    if program.max_tokens:  # a config that caps stages caps the new ones too
        assert {"agreement", "web_query"} <= set(program.max_tokens)


def test_packaged_settings_send_free_text_to_the_lm_judgement_and_mcq_to_letters() -> None:
    from clearmed.signatures.records import Question
    from clearmed.testing import QUESTION, build_toy_program, label_all, pathway_replies, verifier_reply

    settings = load_config("embedded").program.model_copy(
        update={"mcq_decoding": "generate", "verifier_mode": "lm", "source_quality": "lm", "parallel_pathways": "off"}
    )
    free = Question(id="free", text=QUESTION.text, answer_mode="free_text")
    script = {
        "parametric": {"rationale": "r", "answer": "primary hypothyroidism"},
        "local_answer": {"rationale": "r", "cited_ids": ["L1"], "answer": "an underactive thyroid gland"},
        "dynamic_answer": {"rationale": "r", "cited_ids": ["W1"], "answer": "Cushing syndrome"},
        "agreement": {
            "parametric_equals_local": True,
            "parametric_equals_dynamic": False,
            "local_equals_dynamic": False,
        },
        "source_quality": label_all("high"),
        "verifier": verifier_reply("consensus", answer="primary hypothyroidism"),
        "response": {"response": "Primary hypothyroidism."},
    }
    program, engine, _ = build_toy_program(script, question=free, settings=settings)
    decision = program(question=free).decision
    assert decision.agreement is not None
    assert (decision.agreement.method, decision.agreement.parametric_local) == ("lm", True)
    assert "agreement" in engine.stages()

    mcq, engine, _ = build_toy_program(
        {
            **pathway_replies("A", "A", "B"),
            "source_quality": label_all("high"),
            "verifier": verifier_reply("consensus"),
        },
        settings=settings,
    )
    assert mcq(question=QUESTION).decision.agreement.method == "letters"
    assert "agreement" not in engine.stages()


def test_minimal_config_takes_the_paper_defaults(tmp_path: Path) -> None:
    config = load_config(str(write(tmp_path, MINIMAL)))
    assert config.thresholds.guard_min_high == 1
    assert config.program.local_k == 16
    assert config.corpus is None


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ("[program]\nlocal_kk = 3\n", "program.local_kk: unknown key"),
        (
            "[thresholds]\nguard_min_high = -1\n",
            "thresholds.guard_min_high: Input should be greater than or equal to 0",
        ),
        ("[program]\nverifier_mode = 'magic'\n", "program.verifier_mode:"),
        ("[colour]\nx = 1\n", "colour: unknown key"),
        ("[search]\nbackend = 'bing'\n", "search.backend:"),
    ],
)
def test_errors_name_the_file_and_the_field(tmp_path: Path, extra: str, expected: str) -> None:
    path = write(tmp_path, MINIMAL + extra)
    with pytest.raises(ConfigError) as caught:
        load_config(str(path))
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(str(path))
    assert expected in message


# Removed in issue 49: they decided nothing, as [program] local_k and dynamic_k set how many passages are read.
REMOVED = [
    ("corpus", 'preset = "openstax"', "k", "5", "[program] local_k"),
    ("search", 'backend = "offline"', "max_results", "8", "[program] dynamic_k"),
]


@pytest.mark.parametrize(("table", "source", "key", "value", "replacement"), REMOVED)
def test_a_removed_setting_is_refused_in_one_line_naming_what_replaced_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], table: str, source: str, key: str, value: str, replacement: str
) -> None:
    from clearmed.cli.main import main

    path = write(tmp_path, f"{MINIMAL}[{table}]\n{source}\n{key} = {value}\n")
    assert main(["config", "-c", str(path)]) == 2
    err = capsys.readouterr().err
    removed = f"[{table}] {key} was removed: set {replacement}"
    assert err == f"clearmed: error: {path}: {table}.{key}: unknown key ({removed})\n"
    with pytest.raises(ConfigError) as caught:  # through --set as well, on a config that has the table
        load_config("embedded", [f"{table}.{key}={value}"])
    assert f"{table}.{key}: unknown key" in str(caught.value)
    assert replacement in str(caught.value)
    assert "\n" not in str(caught.value)


def test_missing_main_backbone(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="backbones"):
        load_config(str(write(tmp_path, "[program]\nlocal_k = 3\n")))


def test_invalid_toml_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(str(write(tmp_path, "[backbones.main\n")))


def test_unknown_config_name_lists_the_packaged_ones() -> None:
    with pytest.raises(ConfigError, match="embedded"):
        load_config("no-such-config")


def test_relative_paths_resolve_against_the_config_folder(tmp_path: Path) -> None:
    text = MINIMAL + '[search]\nbackend = "offline"\npages = "pages/web.jsonl"\ncache_path = "~/x.sqlite"\n'
    config = load_config(str(write(tmp_path, text)))
    assert config.search is not None
    assert config.search.pages == (tmp_path / "pages" / "web.jsonl").resolve()
    assert config.search.cache_path == Path("~/x.sqlite").expanduser()
