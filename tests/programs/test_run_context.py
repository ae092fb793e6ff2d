"""The run context: present inside a run, an error outside one (usage rows never vanish silently)."""

from __future__ import annotations

import pytest

from clearmed.programs.lm.context import NoRunContext, RunContext, activate, current


def test_current_is_the_active_context_and_raises_outside_a_run() -> None:
    with pytest.raises(NoRunContext, match="no active run context"):
        current()
    context = RunContext()
    with activate(context):
        assert current() is context
    with pytest.raises(NoRunContext):
        current()
