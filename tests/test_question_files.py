"""scripts/count_question_files.py counts a file when one of its functions runs for the question, not for an import:
a helper's comprehension that builds a module constant is the import's (it made signatures/clear.py and
backbones/model_files.py count, two files no step of the question calls)."""

from __future__ import annotations

import importlib
import runpy
import sys
from pathlib import Path
from types import FrameType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_a_helpers_comprehension_at_import_is_the_imports_and_a_steps_is_the_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    importing = runpy.run_path(str(ROOT / "scripts/count_question_files.py"), run_name="probe")["_importing"]
    (tmp_path / "probe_constants.py").write_text(
        "def numbered(count):\n"
        "    return tuple(f'part{i}' for i in range(count))\n\n\n"
        "PARTS = numbered(3)\n\n\n"
        "def step():\n"
        "    return [part.upper() for part in PARTS]\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    seen: list[tuple[str, bool]] = []

    def tracer(frame: FrameType, event: str, arg: object) -> None:
        if event == "call" and frame.f_code.co_filename.endswith("probe_constants.py"):
            seen.append((frame.f_code.co_name, importing(frame)))

    sys.settrace(tracer)
    try:
        probe = importlib.import_module("probe_constants")
        probe.step()
    finally:
        sys.settrace(None)
        sys.modules.pop("probe_constants", None)
    # A generator's frame is "called" again each time it resumes: each (function, verdict) once, in order.
    assert list(dict.fromkeys(seen)) == [
        ("<module>", True),
        ("numbered", True),
        ("<genexpr>", True),
        ("step", False),
        ("<listcomp>", False),
    ]
