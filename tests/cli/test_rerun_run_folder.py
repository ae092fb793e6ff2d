"""Runs that can be rerun (issue 50, item 11): `-c RUN_DIR` (or `-c RUN_DIR/config.json`) runs that run's own config,
its stored snapshot; the snapshot records only the fields of each backbone's kind; a masked credential is asked for
again in one line instead of being sent as `***`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clearmed.cli.main import main
from clearmed.config import config_name, load_config
from clearmed.evaluation import config_digest, read_records
from clearmed.evaluation.folder import config_snapshot
from clearmed.evaluation.store import load_manifest
from tests.cli.scripted_cli import config_toml, scripted

SERVER = "http://127.0.0.1:9/v1"


@pytest.fixture
def first_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A finished run of Direct on 2 demo questions, made with `--set program.local_k=3` over a config file."""
    scripted(monkeypatch)
    config = tmp_path / "fake-a.toml"
    config.write_text(config_toml(run=f'runs_dir = "{tmp_path / "runs"}"'), encoding="utf-8")
    run_dir = tmp_path / "first"
    argv = ["eval", "--program", "direct", "--benchmark", "demo", "--limit", "2", "-c", str(config)]
    assert main([*argv, "--set", "program.local_k=3", "--run-dir", str(run_dir)]) == 0
    config.unlink()  # the rerun needs nothing but the run folder
    return run_dir


@pytest.mark.parametrize("given", ["folder", "config.json"])
def test_c_run_dir_reruns_the_runs_own_config(
    first_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], given: str
) -> None:
    source = first_run if given == "folder" else first_run / "config.json"
    again = tmp_path / "again"
    argv = ["eval", "--program", "direct", "--benchmark", "demo", "--limit", "2", "-c", str(source)]
    assert main([*argv, "--run-dir", str(again)]) == 0, capsys.readouterr().err  # before: "not valid TOML"
    assert load_manifest(again).config_digest == load_manifest(first_run).config_digest
    assert load_manifest(again).config_source == str(first_run / "config.json")
    assert len(list(read_records(again))) == 2
    # the first run's folder resumes under its own config: the same run
    assert main([*argv, "--run-dir", str(first_run)]) == 0
    # its default folder is named by the run it reruns, under the runs folder that run's config named
    assert main(argv) == 0
    assert (tmp_path / "runs" / "first" / "demo" / "direct-n2-s0" / "manifest.json").is_file()


def test_a_run_folders_config_takes_overrides_and_reloads_exactly(first_run: Path) -> None:
    config = load_config(str(first_run), ["program.local_k=5"])
    assert config.program.local_k == 5
    assert config_name(str(first_run / "config.json")) == config_name(str(first_run)) == "first"
    for name in ("embedded", "o3-mini", "qwen3.5-9b-vllm", "dual-model"):  # every packaged config, through its snapshot
        original = load_config(name)
        folder = first_run.parent / f"snapshot-{name}"
        folder.mkdir()
        (folder / "config.json").write_text(config_snapshot(original), encoding="utf-8")
        reloaded = load_config(str(folder))
        assert reloaded.model_dump(exclude={"source"}) == original.model_dump(exclude={"source"}), name
        assert config_digest(reloaded) == config_digest(original)


def test_the_snapshot_records_only_the_fields_of_the_backbones_kind(tmp_path: Path) -> None:
    """An embedded config pointed at a server keeps no model file and no n_ctx (before: both, at their defaults)."""
    config = load_config("embedded", ["backbones.main.kind=openai_compatible", f"backbones.main.api_base={SERVER}"])
    main_table = json.loads(config_snapshot(config))["backbones"]["main"]
    assert main_table["kind"] == "openai_compatible"
    assert main_table["api_base"] == SERVER
    for embedded_only in ("n_ctx", "packaged_model", "model_path", "n_batch", "prompt_cache_mb"):
        assert embedded_only not in main_table
    embedded = json.loads(config_snapshot(load_config("embedded")))["backbones"]["main"]
    assert embedded["n_ctx"] == 8192
    assert "api_base" not in embedded


def test_a_masked_value_is_asked_for_again_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A snapshot holds `***` where a secret was masked as it was written (an older clearmed's api_base with a
    password, say): rerun, it would be sent as written; it is asked for instead."""
    snapshot = json.loads(
        config_snapshot(
            load_config("embedded", ["backbones.main.kind=openai_compatible", f"backbones.main.api_base={SERVER}"])
        )
    )
    snapshot["backbones"]["main"]["api_base"] = "http://***@127.0.0.1:9/v1"
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(snapshot), encoding="utf-8")
    assert main(["config", "-c", str(folder)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (
        f"clearmed: error: {folder / 'config.json'}: backbones.main.api_base: a credential in it was masked when the "
        "run was saved; give it again with --set backbones.main.api_base=..."
    )
    given = load_config(str(folder), [f"backbones.main.api_base={SERVER}"])
    assert given.backbones["main"].api_base == SERVER  # type: ignore[union-attr]


def test_a_folder_that_is_no_run_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(Exception, match=r"a folder with no config.json: give a config name, a TOML file or a run"):
        load_config(str(tmp_path))
    (tmp_path / "config.json").write_text('{"not": "a config"}', encoding="utf-8")
    with pytest.raises(Exception, match=r"not a run's config snapshot \(it has no backbones table\)"):
        load_config(str(tmp_path))
    (tmp_path / "config.json").write_text("{", encoding="utf-8")
    with pytest.raises(Exception, match=r"config.json: not valid JSON"):
        load_config(str(tmp_path))
