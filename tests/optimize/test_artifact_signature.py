"""A compiled program saved for an older verifier signature is refused in one line (issue 46): DSPy pairs saved
fields with the signature's by position and would load the old instructions over the new policy unannounced."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clearmed.core.errors import UsageError
from clearmed.optimize.artifacts import load_program_state, save_program_state
from clearmed.programs.clear import CLEAR


def test_a_state_saved_for_the_old_verifier_signature_is_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "program.json"
    save_program_state(CLEAR(), path)
    load_program_state(CLEAR(), path)  # the program's own state loads
    state = json.loads(path.read_text(encoding="utf-8"))
    name = next(key for key in state if key.startswith("verifier"))
    # Before issue 46 the verifier had 9 fields: 5 inputs, then answer, route, confidence, rationale.
    state[name]["signature"]["fields"] = [
        *state[name]["signature"]["fields"][:8],
        {"prefix": "Rationale:", "description": "one or two sentences: which evidence decides and why"},
    ]
    path.write_text(json.dumps(state), encoding="utf-8")
    program = CLEAR()
    before = program.verifier.verify.signature.instructions
    with pytest.raises(UsageError) as caught:
        load_program_state(program, path)
    message = str(caught.value)
    assert f"predictor {name} was compiled for an older signature (9 fields, this program's has 16)" in message
    assert "\n" not in message
    assert program.verifier.verify.signature.instructions == before  # nothing half-loaded
