"""One backbone model per kind: an embedded config pointed at a server through `extends` or `--set` keeps only the
server's fields, the run's snapshot holds only them, and a run made before the split still resumes (issue 49's
"records at home", issue 50 item 5)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clearmed.backbones.config import (
    BackboneConfig,
    ConfigError,
    EmbeddedBackbone,
    HostedBackbone,
    OpenAICompatibleBackbone,
)
from clearmed.cli.main import main
from clearmed.config import load_config
from clearmed.evaluation import EvalSpec
from clearmed.evaluation.folder import config_snapshot, open_run, same_config_as_snapshot
from clearmed.evaluation.store import RunStore, RunStoreError
from clearmed.testing import QUESTION, format_chat_reply
from tests.backbones.fake_openai import ScriptedOpenAI

SERVER = "http://127.0.0.1:9/v1"
# The fields only an embedded backbone has, as clearmed wrote them into every remote backbone's config.json before the
# split (the flat model's defaults), and a served model's table.
FLAT_EMBEDDED = {
    "packaged_model": "qwen2.5-coder-1.5b-instruct-q4_k_m",
    "n_ctx": 8192,
    "n_batch": 512,
    "seed": 0,
    "prompt_cache_mb": 512,
}
SERVED = f'[backbones.main]\nkind = "openai_compatible"\nmodel = "served-model"\napi_base = "{SERVER}"\n'


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_an_embedded_config_extended_to_a_server_keeps_only_the_servers_fields(tmp_path: Path) -> None:
    config = load_config(str(write(tmp_path / "served.toml", f'extends = "embedded"\n{SERVED}')))
    main = config.backbones["main"]
    assert isinstance(main, OpenAICompatibleBackbone)
    assert (main.api_base, main.model) == (SERVER, "served-model")
    assert main.temperature == 0.0
    assert main.max_tokens == 256
    assert not hasattr(main, "n_ctx")
    assert config.program.local_k == load_config("embedded").program.local_k  # and its other tables


def test_set_points_an_embedded_config_at_a_server(tmp_path: Path) -> None:
    config = load_config("embedded", ["backbones.main.kind=openai_compatible", f"backbones.main.api_base={SERVER}"])
    assert isinstance(config.backbones["main"], OpenAICompatibleBackbone)
    hosted = load_config("embedded", ["backbones.main.kind=hosted", "backbones.main.model=ollama_chat/llama3"])
    assert isinstance(hosted.backbones["main"], HostedBackbone)
    # and back: a server config made embedded drops the server's address and keeps the model file's default
    served = write(tmp_path / "served.toml", SERVED + 'api_key_env = "SERVED_KEY"\ntimeout = 30.0\n')
    local = load_config(str(served), ["backbones.main.kind=embedded"])
    assert isinstance(local.backbones["main"], EmbeddedBackbone)
    assert local.backbones["main"].n_ctx == 8192


@pytest.mark.parametrize("field", ["n_ctx = 4096", "n_ctx = 8192", 'model_path = "m.gguf"', "prompt_cache_mb = 0"])
def test_an_embedded_field_set_in_the_file_that_names_a_server_is_refused_in_one_line(
    tmp_path: Path, field: str
) -> None:
    path = write(tmp_path / "served.toml", f'extends = "embedded"\n{SERVED}{field}\n')
    with pytest.raises(ConfigError) as info:
        load_config(str(path))
    name = field.split(" ")[0]
    assert (
        str(info.value)
        == f'{path}: backbones.main.{name}: only allowed with kind = "embedded", not "openai_compatible"'
    )
    with pytest.raises(ConfigError, match=r'backbones\.main\.n_ctx: only allowed with kind = "embedded", not "hosted"'):
        load_config(
            "embedded", ["backbones.main.kind=hosted", "backbones.main.model=ollama/x", "backbones.main.n_ctx=1"]
        )


def test_the_snapshot_of_a_remote_backbone_holds_no_embedded_field(tmp_path: Path) -> None:
    config = load_config(str(write(tmp_path / "served.toml", f'extends = "embedded"\n{SERVED}')))
    main = json.loads(config_snapshot(config))["backbones"]["main"]
    assert main["kind"] == "openai_compatible"
    assert main["api_base"] == SERVER
    assert sorted(set(main) & {*FLAT_EMBEDDED, "model_path", "gguf_repo", "gguf_file", "n_threads"}) == []
    embedded = json.loads(config_snapshot(load_config("embedded")))["backbones"]["main"]
    assert embedded["n_ctx"] == 8192
    assert "extra" not in embedded
    assert "api_base" not in embedded


def test_an_embedded_config_pointed_at_a_server_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    reply = format_chat_reply({"answer": "A", "rationale": "the textbook says so"})
    with ScriptedOpenAI(reply) as server:
        argv = ["eval", "--program", "direct", "--benchmark", "demo", "--limit", "1", "-c", "embedded"]
        argv += [
            "--set",
            "backbones.main.kind=openai_compatible",
            "--set",
            f"backbones.main.api_base={server.api_base}",
        ]
        argv += ["--set", "program.mcq_decoding=generate", "--run-dir", str(tmp_path / "run")]
        code = main(argv)
        out = capsys.readouterr()
    assert code == 0, out.err
    assert "only allowed with" not in out.err + out.out
    assert server.requests, "the server was never asked"
    snapshot = json.loads((tmp_path / "run" / "config.json").read_text(encoding="utf-8"))
    assert "n_ctx" not in snapshot["backbones"]["main"]


def _open(folder: Path, config_path: str, overrides: list[str]) -> None:
    config = load_config(config_path, overrides)
    spec = EvalSpec(program="direct", benchmark="demo", source="demo", questions=[QUESTION], run_dir=folder)
    with RunStore(folder) as store:
        open_run(store, spec, config)


def flat_snapshot(config_path: str, overrides: list[str]) -> dict[str, object]:
    """The config.json the flat BackboneConfig wrote for this config: every kind's fields at their defaults."""
    snapshot = json.loads(config_snapshot(load_config(config_path, overrides)))
    for table in snapshot["backbones"].values():
        table.update({"extra": {}} if table["kind"] == "embedded" else FLAT_EMBEDDED)
    return snapshot


@pytest.mark.parametrize(
    "overrides",
    [[], ["backbones.main.kind=openai_compatible", f"backbones.main.api_base={SERVER}"]],
    ids=["embedded", "openai_compatible"],
)
def test_a_run_made_before_the_split_resumes(tmp_path: Path, overrides: list[str]) -> None:
    """Its digest was of the flat model, so it differs; its snapshot is read without the other kinds' defaults."""
    folder = tmp_path / "run"
    _open(folder, "embedded", overrides)  # a run folder, then made as the flat model wrote it
    (folder / "config.json").write_text(json.dumps(flat_snapshot("embedded", overrides)), encoding="utf-8")
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    (folder / "manifest.json").write_text(json.dumps({**manifest, "config_digest": "0123456789abcdef"}))
    assert same_config_as_snapshot(folder, load_config("embedded", overrides))
    _open(folder, "embedded", overrides)  # resumes: no error
    # A value the flat model never wrote for a remote backbone is not read away: that run is refused, naming both.
    snapshot = flat_snapshot("embedded", overrides)
    snapshot["backbones"]["main"]["n_ctx"] = 4096  # type: ignore[index]
    (folder / "config.json").write_text(json.dumps(snapshot), encoding="utf-8")
    differs = r"config '0123456789abcdef' != '[0-9a-f]{16}': backbones\.main\.n_ctx 4096 != (8192|unset)\)"
    with pytest.raises(RunStoreError, match=r"holds a different run \(" + differs):
        _open(folder, "embedded", overrides)


def test_an_old_snapshots_backbone_is_read_as_its_kind() -> None:
    """`BackboneConfig.model_validate` (compare's and tune's reader of a run's config.json) takes either form."""
    table = {"kind": "openai_compatible", "model": "m", "api_base": SERVER, "num_retries": 3, **FLAT_EMBEDDED}
    assert isinstance(BackboneConfig.model_validate(table), OpenAICompatibleBackbone)
    embedded = BackboneConfig.model_validate({"kind": "embedded", "model": "m", "extra": {}, "n_ctx": 4096})
    assert isinstance(embedded, EmbeddedBackbone)
    assert embedded.n_ctx == 4096
    with pytest.raises(ValueError, match='only allowed with kind = "embedded"'):
        BackboneConfig.model_validate({**table, "n_ctx": 4096})
