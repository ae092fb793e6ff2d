"""What a run is, when it is resumed (issue 58, items 6 and 8): a larger `--limit` with the same seed starts from the
run already made (its questions not asked again, its folder left as it was); the endpoint's address is not part of
what a run is, so the same server reached as `localhost` resumes a run made at `127.0.0.1`, saying so in one line,
and the summary lists every endpoint the run used."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clearmed.cli.main import main
from clearmed.evaluation.store import load_manifest, read_records
from clearmed.testing import demo_config_toml
from tests.backbones.fake_openai import ScriptedOpenAI
from tests.cli.scripted_cli import config_toml, scripted
from tests.cli.test_exit_codes import DIRECT_ANSWER, PROGRAM


def test_a_larger_limit_with_the_same_seed_starts_from_the_smaller_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    engine = scripted(monkeypatch)
    config = tmp_path / "remote.toml"
    config.write_text(config_toml(run=f'runs_dir = "{tmp_path / "runs"}"'), encoding="utf-8")

    def argv(limit: int) -> list[str]:
        return ["eval", "--program", "direct", "--benchmark", "demo", "--limit", str(limit), "--seed", "3", "-c",
                str(config)]  # fmt: skip

    assert main(argv(2)) == 0
    runs = tmp_path / "runs" / "remote" / "demo"
    small, large = runs / "direct-n2-s3", runs / "direct-n4-s3"
    before = (small / "results.jsonl").read_bytes()
    asked, first = {call.user for call in engine.calls}, len(engine.calls)
    capsys.readouterr()
    assert main(argv(4)) == 0
    err = capsys.readouterr().err
    assert (
        f"note: {large} starts from {small} (the same run on a smaller --limit): its 2 finished questions "
        in " ".join(err.split())
    )
    records = list(read_records(large))
    assert len(records) == 4
    assert len({r.question_id for r in records}) == 4
    # The two questions of the smaller run were not asked again; the two it adds were.
    again = {call.user for call in engine.calls[first:]}
    assert again
    assert not asked & again
    assert (small / "results.jsonl").read_bytes() == before  # the smaller run's folder is left as it was
    assert json.loads((large / "summary.json").read_text())["evaluated"] == 4
    # Another seed is another draw: nothing to start from.
    capsys.readouterr()
    assert main([*argv(4)[:-4], "--seed", "4", "-c", str(config)]) == 0
    assert "starts from" not in capsys.readouterr().err


def test_the_same_server_under_another_address_resumes_the_run_and_the_summary_lists_both(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with ScriptedOpenAI(DIRECT_ANSWER) as server:
        port = server.api_base.split(":")[2].split("/")[0]

        def config(host: str) -> Path:
            backbone = (
                f'kind = "openai_compatible"\nmodel = "m"\napi_base = "http://{host}:{port}/v1"\nnum_retries = 0\n'
                "cache = false"
            )
            path = tmp_path / f"{host}.toml"
            path.write_text(demo_config_toml(backbone=backbone, program=PROGRAM), encoding="utf-8")
            return path

        run_dir = tmp_path / "run"
        argv = ["eval", "--program", "direct", "--benchmark", "demo", "--limit", "3", "--run-dir", str(run_dir)]
        assert main([*argv, "-c", str(config("127.0.0.1")), "--stop-after", "1"]) == 0
        capsys.readouterr()
        assert main([*argv, "-c", str(config("localhost"))]) == 0  # resumed, not "holds a different run"
        err = " ".join(capsys.readouterr().err.split())
    assert (
        f"note: {run_dir} resumes on another endpoint: main at http://localhost:{port}/v1 (before: "
        f"http://127.0.0.1:{port}/v1); the summary lists every endpoint the run used" in err
    )
    assert len(list(read_records(run_dir))) == 3
    both = {"main": [f"http://127.0.0.1:{port}/v1", f"http://localhost:{port}/v1"]}
    assert load_manifest(run_dir / "manifest.json").endpoints == both
    assert json.loads((run_dir / "summary.json").read_text())["endpoints"] == both
