"""What the shipped scripts and embedded configs point at exists (issue 31, item 9)."""

from __future__ import annotations

import re
from pathlib import Path

from clearmed.optimize.tuning import PARAMETERS

ROOT = Path(__file__).resolve().parents[2]


def test_the_mmlu_med_script_stops_on_a_failed_step_and_tunes_only_what_exists() -> None:
    script = (ROOT / "scripts" / "eval_mmlu_med.sh").read_text(encoding="utf-8")
    # Before: `set -uo pipefail` and a failed eval echoed and went on, to tune and compare a partial run.
    assert "set -euo pipefail" in script
    assert "return 1" in script
    groups = [g for found in re.findall(r"--params (\S+)", script) for g in found.split(",")]
    assert groups  # the script still tunes
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
