"""Quiet runs (issue 58, item 7): `clearmed eval --quiet` and `clearmed suite --quiet` say one line a run (the suite
its closing line too), and a Python warning is one line naming its category, never Python's form with the source
line of the code that warned."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest

from clearmed.cli.main import main
from tests.cli.scripted_cli import config_toml, scripted

RUN_LINE = re.compile(
    r"^(?P<program>[\w-]+) on demo: 3/3 questions, accuracy \d+\.\d% \[\d+\.\d%, \d+\.\d%\], 0 degraded, "
    r"\$\d+\.\d\d: (?P<folder>\S+)$"
)


def write_config(tmp_path: Path, name: str, program: str = "") -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(config_toml(program, run=f'runs_dir = "{tmp_path / "runs"}"'), encoding="utf-8")
    return path


def test_eval_quiet_says_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    scripted(monkeypatch)
    config, run_dir = write_config(tmp_path, "remote"), tmp_path / "run"
    argv = ["eval", "--program", "direct", "--benchmark", "demo", "--limit", "3", "-c", str(config)]
    assert main([*argv, "--run-dir", str(run_dir), "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert out == ""
    (line,) = err.splitlines()
    matched = RUN_LINE.match(line)
    assert matched is not None, line
    assert (matched["program"], matched["folder"]) == ("direct", str(run_dir))
    assert (run_dir / "summary.json").is_file()
    assert (run_dir / "report" / "index.html").is_file()
    # Without it: the progress, the tables and the folders.
    assert main([*argv, "--run-dir", str(tmp_path / "loud")]) == 0
    out, err = capsys.readouterr()
    assert len(out.splitlines()) > 5
    assert "run folder:" in err


def test_a_four_cell_suite_quiet_says_one_line_a_cell_and_its_closing_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    scripted(monkeypatch)
    configs = [write_config(tmp_path, name) for name in ("alpha", "beta")]
    out_dir = tmp_path / "suite"
    argv = ["suite", "--program", "direct", "--program", "clear", "--benchmark", "demo", "--limit", "3",
            "--out", str(out_dir), *(item for c in configs for item in ("-c", str(c))), "--quiet"]  # fmt: skip
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 5, lines
    assert all(RUN_LINE.match(line) for line in lines[:4]), lines
    assert lines[4] == f"suite: 4 cells done; comparisons in {out_dir / 'compare'}"
    assert (out_dir / "compare").is_dir()


def test_a_warning_is_one_line_naming_its_category(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    scripted(monkeypatch)
    # The calibrated verifier over generated letters (no log-probabilities) falls back, and warns once.
    config = write_config(tmp_path, "generated", program='mcq_decoding = "generate"\nverifier_mode = "calibrated"')
    argv = ["eval", "--program", "clear", "--benchmark", "demo", "--limit", "3", "-c", str(config), "--quiet"]
    with warnings.catch_warnings():  # shown as Python shows them outside pytest, every time
        warnings.simplefilter("always")
        assert main([*argv, "--run-dir", str(tmp_path / "run")]) == 0
    err = capsys.readouterr().err
    warned = [line for line in err.splitlines() if "CalibratedFallbackWarning" in line]
    assert len(warned) == 1, err
    assert warned[0].startswith("warning: verifier_mode = 'calibrated' fell back to the deterministic (heuristic) ")
    assert warned[0].endswith(" (CalibratedFallbackWarning)")
    assert ".py:" not in err
    assert "warnings.warn" not in err
    assert len(err.splitlines()) == 2  # the warning and the run's line
