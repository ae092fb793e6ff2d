"""A provider's Retry-After may not stall a run: waits are capped, short hints and DSPy's backoff kept."""

from __future__ import annotations

from dspy.clients import execution

from clearmed.backbones.config import BackboneConfig
from clearmed.backbones.factory import build_lm
from clearmed.backbones.retry_wait import MAX_RETRY_WAIT_S, capped


class RateLimited(Exception):
    def __init__(self, retry_after: float | None) -> None:
        super().__init__("429")
        self.retry_after = retry_after


def test_capped_delay_honours_short_hints_and_caps_long_ones() -> None:
    wait = capped(lambda exc, attempt: getattr(exc, "retry_after", None) or 2.0**attempt, 60.0)
    assert wait(RateLimited(3), 0) == 3
    assert wait(RateLimited(3600), 0) == 60.0
    assert wait(RateLimited(None), 2) == 4.0


def test_building_an_lm_installs_the_ceiling_on_dspy_retries() -> None:
    build_lm(BackboneConfig(kind="hosted", model="ollama_chat/llama3"))
    assert hasattr(execution._delay, "__wrapped__")
    assert execution._delay(RateLimited(3600), 0) == MAX_RETRY_WAIT_S
    assert execution._delay(RateLimited(5), 0) == 5
