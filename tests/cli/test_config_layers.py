"""`extends` and `--set`: layered configs validated like one file, on every command that takes -c."""

from __future__ import annotations

from pathlib import Path

import pytest

from clearmed.backbones.config import ConfigError
from clearmed.cli.main import build_parser, main
from clearmed.config import load_config, parse_overrides

BACKBONE = '[backbones.main]\nkind = "openai_compatible"\nmodel = "m"\napi_base = "http://127.0.0.1:9/v1"\n'


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_extends_inherits_a_packaged_config_table_by_table(tmp_path: Path) -> None:
    base = load_config("embedded")
    child = load_config(str(write(tmp_path / "mine.toml", 'extends = "embedded"\n[program]\nlocal_k = 7\n')))
    assert child.program.local_k == 7
    # every other setting is the parent's, the nested tables merged key by key
    assert child.program.model_copy(update={"local_k": base.program.local_k}) == base.program
    assert child.backbones == base.backbones
    assert child.thresholds == base.thresholds


def test_an_extended_files_relative_paths_resolve_against_its_own_folder(tmp_path: Path) -> None:
    write(tmp_path / "shared" / "base.toml", BACKBONE + '[run]\nruns_dir = "runs-here"\n')
    child = write(tmp_path / "mine" / "child.toml", 'extends = "../shared/base.toml"\n[run]\nseed = 3\n')
    config = load_config(str(child))
    assert config.run.runs_dir == (tmp_path / "shared" / "runs-here").resolve()
    assert config.run.seed == 3


def test_a_circle_of_extends_and_a_bad_extends_are_refused_in_one_line(tmp_path: Path) -> None:
    write(tmp_path / "a.toml", 'extends = "b.toml"\n' + BACKBONE)
    write(tmp_path / "b.toml", 'extends = "a.toml"\n')
    with pytest.raises(ConfigError, match="which extends it again"):
        load_config(str(tmp_path / "a.toml"))
    write(tmp_path / "c.toml", "extends = 3\n" + BACKBONE)
    with pytest.raises(ConfigError, match="extends must be a packaged config name or a TOML path"):
        load_config(str(tmp_path / "c.toml"))
    write(tmp_path / "d.toml", 'extends = "no-such-config"\n' + BACKBONE)
    with pytest.raises(ConfigError, match="no such config file"):
        load_config(str(tmp_path / "d.toml"))


def test_set_values_are_read_as_toml_else_as_strings() -> None:
    tables = parse_overrides(
        ["program.local_k=32", "backbones.main.model=gpt-4o", "program.max_tokens.verifier=99", 'run.note="x=y"']
    )
    assert tables == {
        "program": {"local_k": 32, "max_tokens": {"verifier": 99}},
        "backbones": {"main": {"model": "gpt-4o"}},
        "run": {"note": "x=y"},
    }
    config = load_config(
        "embedded", ["program.local_k=32", "program.max_tokens.verifier=99", "thresholds.guard_min_high=3"]
    )
    assert (config.program.local_k, config.program.max_tokens["verifier"], config.thresholds.guard_min_high) == (
        32,
        99,
        3,
    )
    assert (
        config.program.max_tokens["guard"] == load_config("embedded").program.max_tokens["guard"]
    )  # merged, not replaced


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("program.local_kk=3", "program.local_kk: unknown key (with --set program.local_kk=3)"),
        ('program.local_k="3"', "program.local_k: Input should be a valid integer"),
        ("local_k=3", "--set local_k=3: expected SECTION.KEY=VALUE"),
        ("program.local_k", "expected SECTION.KEY=VALUE"),
    ],
)
def test_a_bad_set_is_refused_in_one_line(override: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "-c", "embedded", "--set", override]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert err.count("\n") == 1


def test_a_set_path_is_relative_to_the_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert load_config("embedded", ["run.runs_dir=elsewhere"]).run.runs_dir == (tmp_path / "elsewhere").resolve()


@pytest.mark.parametrize("command", ["ask", "config", "eval", "compile", "tune", "doctor"])
def test_every_command_that_takes_a_config_takes_set(command: str) -> None:
    required = {"eval": ["--benchmark", "demo"], "compile": ["--optimizer", "bootstrap", "--benchmark", "demo",
                "--train", "1", "--val", "1", "--out", "o"], "tune": ["--run", "r", "--out", "o"]}  # fmt: skip
    args = build_parser().parse_args([command, *required.get(command, []), "-c", "x", "--set", "program.local_k=2"])
    assert (args.config, args.overrides) == ("x", ["program.local_k=2"])
