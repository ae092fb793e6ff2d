"""What the shipped scripts and embedded configs point at exists (issue 31, item 9)."""

from __future__ import annotations

import re
from pathlib import Path

from clearmed.optimize.tuning import PARAMETERS

ROOT = Path(__file__).resolve().parents[2]


def test_the_mmlu_med_suite_loads_its_id_files_exist_and_it_tunes_only_what_exists() -> None:
    from clearmed.api.suite_file import load_suite

    path = ROOT / "docs" / "experiments" / "mmlu-med-suite.toml"
    suite = load_suite(path)  # it replaced scripts/eval_mmlu_med.sh
    cells = [(cell.benchmark.folder, cell.program) for cell in suite.cells()]
    assert cells[0] == ("mmlu-medical-train", "clear")  # CLEAR first: the baselines reuse its cached passes
    assert {program for _, program in cells[1:]} == {"clear", "direct", "medrag", "clear-heuristic-contested"}
    assert all(b.ids and (ROOT / b.ids).is_file() for b in suite.benchmarks)
    text = path.read_text(encoding="utf-8")
    groups = [g for found in re.findall(r"--params (\S+)", text) for g in found.split(",")]
    assert groups  # its comments still tune
    # Before: `--params calibrated_weights`, a group removed since.
    assert [g for g in groups if g not in PARAMETERS] == []


def test_every_script_a_config_cites_exists() -> None:
    cited = {
        (config.name, path)
        for config in (ROOT / "configs").glob("*.toml")
        for path in re.findall(r"\b((?:scripts|docs)/[\w/.-]+\.(?:py|sh))", config.read_text(encoding="utf-8"))
    }
    assert cited  # the embedded configs cite their measurements
    # Before: two embedded configs cited scripts/compare_web_queries.py, moved to docs/experiments/.
    assert [(name, path) for name, path in sorted(cited) if not (ROOT / path).is_file()] == []
