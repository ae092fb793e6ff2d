"""OpenAI's reasoning models (the o1/o3/o4/o5 and gpt-5 families): how to tell one by its model string, and what it
accepts (temperature 1.0 only, and ``max_tokens`` of at least `REASONING_MIN_MAX_TOKENS`), which `BackboneConfig`
(`backbones.config`) checks when the config loads instead of the provider refusing the call at run time.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["REASONING_MIN_MAX_TOKENS", "is_openai_reasoning_model"]

# Mirrors dspy.clients.lm._is_openai_reasoning_model (private in DSPy 3.4): o1/o3/o4/o5 and gpt-5 families.
_REASONING_FAMILY = re.compile(
    r"^(?:o[1345](?:-(?:mini|nano|pro))?(?:-\d{4}-\d{2}-\d{2})?|gpt-5(?:\.\d+)*(?!-chat)(?:-.*)?)$"
)
REASONING_MIN_MAX_TOKENS: Final = 16000


def is_openai_reasoning_model(model: str) -> bool:
    """True for OpenAI reasoning families, which accept only temperature 1.0 and max_tokens >= 16000."""
    return _REASONING_FAMILY.match(model.rsplit("/", 1)[-1].lower()) is not None
