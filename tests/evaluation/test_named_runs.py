"""Frames and comparisons name what produced them (issue 58, item 4): the model that answered (a recorded pathway's,
not the config's backbone), the sweep's `--set` overrides, and in compare's runs.csv the model, config and seed;
`clearmed compare` takes a suite's folder as `report` and `export` do."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from clearmed import results_frame, runs_frame
from clearmed.api import assemble
from clearmed.api.compare import compare_runs
from clearmed.backbones.client import ClearmedLM
from clearmed.cli.main import main
from clearmed.evaluation.store import MANIFEST, load_manifest, read_records
from clearmed.numbers.results_table import answering_model
from clearmed.report.run_folder import finish_run_folder
from clearmed.testing import ScriptedEngine, _AsyncScriptedEngine, demo_config_toml, verifier_reply
from clearmed.testing.synthetic_run import write_synthetic_suite
from tests.cli.scripted_cli import config_toml
from tests.cli.scripted_cli import scripted as scripted_pathways
from tests.conftest import shared_data_dir

SHARED = shared_data_dir()
MIRAGE = SHARED / "mirage" if SHARED is not None else Path("/nonexistent")
GPT4, GPT35 = "OpenAI/gpt-4-32k", "OpenAI/gpt-35-turbo-16k"


def _scripted_verifier(monkeypatch: pytest.MonkeyPatch) -> None:
    """The config's backbone (model "m"): only the verifier is asked, where the recorded pathways disagree."""
    engine = ScriptedEngine(script={"verifier": verifier_reply("keep_local", answer="B")})
    lm = ClearmedLM(
        "local/scripted",
        service="main backbone m",
        engine=engine,
        async_engine=_AsyncScriptedEngine(engine),
        cache=False,
    )
    monkeypatch.setattr(assemble, "build_role_lms", lambda config, roles=("main", "assessor"): {"main": lm})


def _mirage_run(config: Path, run_dir: Path, model: str) -> Path:
    predictions = MIRAGE / "prediction" / "medqa"
    argv = ["eval", "--program", "clear", "--benchmark", "mirage-medqa", "--source", str(MIRAGE / "benchmark.json")]
    argv += ["-c", str(config), "--run-dir", str(run_dir), "--limit", "6"]
    argv += ["--pathway", f"parametric={predictions / 'cot' / model}", "--pathway", "dynamic=absent"]
    argv += ["--pathway", f"local={predictions / 'rag_32' / model / 'medcorp' / 'RRF-4'}"]
    assert main(argv) == 0
    return run_dir


@pytest.fixture(scope="module")
def mirage_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    if not (MIRAGE / "benchmark.json").is_file():
        pytest.skip("no shared MIRAGE copy")
    tmp = tmp_path_factory.mktemp("mirage-runs")
    config = tmp / "remote.toml"
    config.write_text(demo_config_toml(), encoding="utf-8")
    with pytest.MonkeyPatch.context() as monkeypatch:
        _scripted_verifier(monkeypatch)
        return {model: _mirage_run(config, tmp / model.rsplit("/", 1)[-1], model) for model in (GPT4, GPT35)}


def test_mirage_recorded_runs_group_by_the_model_that_answered(mirage_runs: dict[str, Path], tmp_path: Path) -> None:
    runs = [mirage_runs[GPT4], mirage_runs[GPT35]]
    for model, run_dir in mirage_runs.items():  # every record holds the recorded model, as the issue found
        for record in read_records(run_dir):
            assert {c.model for c in record.decision.bundle.candidates if c.recorded_from} == {model}
    frame = results_frame(runs)
    # Before: both runs had the config's backbone "m" as `model`: one group of 12 questions.
    assert frame.groupby("model").size().to_dict() == {GPT35: 6, GPT4: 6}
    assert set(frame.config_model) == {"m"}  # the config that adjudicated them both, kept beside
    by_model = frame.groupby("model").correct.mean().to_dict()
    per_run = runs_frame(runs).set_index("model")
    assert sorted(per_run.index) == [GPT35, GPT4]
    assert by_model == pytest.approx(per_run.accuracy.to_dict())
    compare_runs(runs, out=tmp_path / "cmp")
    with (tmp_path / "cmp" / "runs.csv").open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    # Before: runs.csv had no model, config or seed.
    assert [(row["model"], row["config"], row["seed"]) for row in rows] == [
        (GPT4, "remote", "0"),
        (GPT35, "remote", "0"),
    ]


def test_a_pathway_run_live_beside_recorded_ones_names_both_models(mirage_runs: dict[str, Path]) -> None:
    run_dir = mirage_runs[GPT4]
    manifest = load_manifest(run_dir / MANIFEST)
    records = list(read_records(run_dir))
    assert answering_model(manifest, records, "m") == GPT4  # the dynamic pathway was left out: GPT-4 alone answered
    live = manifest.model_copy(update={"recorded_pathways": {"parametric": "cot", "local": "rag"}})
    assert answering_model(live, records, "m") == f"{GPT4} + m"  # the dynamic pathway asked the config's model
    plain = manifest.model_copy(update={"recorded_pathways": {}})
    assert answering_model(plain, records, "m") == "m"


def test_a_sweep_cell_names_its_overrides_in_frames_and_in_compare(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scripted_pathways(monkeypatch)
    config = tmp_path / "fake-a.toml"
    config.write_text(config_toml(run=f'runs_dir = "{tmp_path / "runs"}"'), encoding="utf-8")
    argv = ["eval", "--program", "direct", "--benchmark", "demo", "--limit", "2", "-c", str(config)]
    assert main(argv) == 0
    assert main([*argv, "--set", "program.local_k=3", "--set", "program.dynamic_k=2"]) == 0
    demo = tmp_path / "runs" / "fake-a" / "demo"
    runs = [demo / "direct-n2-s0", demo / "direct-n2-s0-program.dynamic_k=2,program.local_k=3"]
    # Before: no column said which --set values a sweep's cell used.
    assert list(runs_frame(runs).overrides.fillna("-")) == ["-", "program.dynamic_k=2; program.local_k=3"]
    assert set(results_frame(runs[1]).overrides) == {"program.dynamic_k=2; program.local_k=3"}
    compare_runs(runs, out=tmp_path / "cmp")
    with (tmp_path / "cmp" / "runs.csv").open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert [(row["config"], row["overrides"], row["model"]) for row in rows] == [
        ("fake-a", "", "m"),
        ("fake-a", "program.dynamic_k=2; program.local_k=3", "m"),
    ]
    comparison = json.loads((tmp_path / "cmp" / "comparison.json").read_text(encoding="utf-8"))
    assert [run["overrides"] for run in comparison["runs"]] == [None, "program.dynamic_k=2; program.local_k=3"]


def test_compare_takes_a_suite_folder_as_report_and_export_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "suite"
    runs = write_synthetic_suite(out)
    for run_dir in runs.values():
        finish_run_folder(run_dir, None, Console(file=io.StringIO()))
    listed = compare_runs([runs["model-a"], runs["model-b"]])
    whole = compare_runs([out])
    # The suite's runs, its merged run once (not its shards), in path order: as `export` and `report` list them.
    assert [run.folder for run in whole.comparison.runs] == [str(runs["model-a"]), str(runs["model-b"])]
    assert whole.markdown == listed.markdown
    assert [(run.model, run.seed) for run in whole.comparison.runs] == [("model-a", 0), ("model-b", 1)]
    capsys.readouterr()
    # Before: exit 2, "suite/manifest.json" not found.
    assert main(["compare", str(out), "--out", str(tmp_path / "cmp")]) == 0
    with (tmp_path / "cmp" / "runs.csv").open(encoding="utf-8") as handle:
        assert [row["model"] for row in csv.DictReader(handle)] == ["model-a", "model-b"]


def test_compare_of_a_folder_with_no_run_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    assert main(["compare", str(tmp_path / "empty")]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert (
        line
        == f"clearmed: error: {tmp_path / 'empty'}: no manifest.json in it or below it (is it a run folder, or a suite's?)"
    )
