"""A run whose backbone refuses connections before it ever answered stops with one line (issue 50 item 2): the
repro command against a closed port on 127.0.0.1 exits 2 and writes no degraded record, in both decoding modes.

Before: each question's calls were retried, recorded as failed steps, and the run went on: 3 degraded records, exit 0
(a whole MedQA run against a mistyped host wrote 1,273)."""

from __future__ import annotations

from pathlib import Path

import pytest

from clearmed.cli.main import main
from clearmed.core.endpoints import mark_reached
from clearmed.evaluation import read_records
from clearmed.evaluation.store import DEGRADED
from clearmed.testing import demo_config_toml


def _closed_config(tmp_path: Path, closed_port: int, decoding: str) -> Path:
    config = tmp_path / "closed.toml"
    backbone = (
        f'kind = "openai_compatible"\nmodel = "m"\napi_base = "http://127.0.0.1:{closed_port}/v1"\nnum_retries = 3'
    )
    config.write_text(
        demo_config_toml(backbone=backbone, program=f'mcq_decoding = "{decoding}"', run=f'runs_dir = "{tmp_path}"'),
        encoding="utf-8",
    )
    return config


@pytest.mark.parametrize("decoding", ["score", "generate"])
def test_eval_against_a_closed_port_exits_2_with_one_line_and_no_degraded_records(
    closed_port: int, tmp_path: Path, capsys: pytest.CaptureFixture[str], decoding: str
) -> None:
    config = _closed_config(tmp_path, closed_port, decoding)
    run_dir = tmp_path / "run"
    argv = ["eval", "--program", "direct", "--benchmark", "demo", "--limit", "3", "-c", str(config)]
    code = main([*argv, "--run-dir", str(run_dir)])
    err = capsys.readouterr().err
    assert code == 2, err
    lines = [line for line in err.splitlines() if line.strip()]
    stopped = [line for line in lines if "unreachable" in line]
    assert len(stopped) == 1, err
    assert f"http://127.0.0.1:{closed_port} refused the connection" in stopped[0]
    assert "Traceback" not in err
    assert list(read_records(run_dir)) == []  # no record, degraded or not: a resume starts the questions afresh
    assert not (run_dir / DEGRADED).exists()


def test_a_run_meets_its_endpoints_anew_so_a_server_an_earlier_run_of_the_process_reached_and_lost_stops_it(
    closed_port: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # An earlier run in this process (a suite's previous cell) reached the server, which has since gone away.
    mark_reached(f"http://127.0.0.1:{closed_port}/v1")
    config = _closed_config(tmp_path, closed_port, "generate")
    run_dir = tmp_path / "run"
    code = main(
        [
            "eval",
            "--program",
            "direct",
            "--benchmark",
            "demo",
            "--limit",
            "2",
            "-c",
            str(config),
            "--run-dir",
            str(run_dir),
        ]
    )
    assert code == 2, capsys.readouterr().err  # not 4 with every question degraded
    assert list(read_records(run_dir)) == []
