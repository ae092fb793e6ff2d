"""What the shard, merge and suite tests share: a scripted LM in place of every backbone the CLI builds, and a
config over the demo bundle for it."""

from __future__ import annotations

from typing import Any

import pytest

from clearmed.api import assemble
from clearmed.backbones.client import ClearmedLM
from clearmed.testing import (
    UNREACHABLE_BACKBONE,
    ScriptedCall,
    ScriptedEngine,
    _AsyncScriptedEngine,
    demo_config_toml,
    label_all,
    verifier_reply,
)


def answer(call: ScriptedCall) -> dict[str, object]:
    """A letter that varies with the question and the pathway, so that runs have right and wrong answers."""
    cited = {"cited_ids": []} if "evidence" in call.user else {}
    return {"rationale": "because", **cited, "answer": "AB"[len(call.user) % 2]}


def scripted(monkeypatch: pytest.MonkeyPatch, **script: Any) -> ScriptedEngine:
    """Every config's backbones are one scripted LM (`script` replaces stages); its engine records the calls."""
    engine = ScriptedEngine(
        script={
            "parametric": answer,
            "local_answer": answer,
            "dynamic_answer": answer,
            "source_quality": label_all("high"),
            "verifier": verifier_reply("consensus"),
            **script,
        }
    )
    lm = ClearmedLM(
        "local/scripted",
        service="main backbone m",
        engine=engine,
        async_engine=_AsyncScriptedEngine(engine),
        cache=False,
        num_retries=0,
    )
    monkeypatch.setattr(assemble, "build_role_lms", lambda config, roles=("main", "assessor"): {"main": lm})
    return engine


def config_toml(program: str = "", run: str | None = None) -> str:
    """A priced remote backbone over the demo bundle, the pathways one after another (usage rows in one order)."""
    return demo_config_toml(
        backbone=UNREACHABLE_BACKBONE + "\nprice = { input = 1000.0, output = 2000.0 }",
        program=f'json_fallback = false\nparallel_pathways = "off"\n{program}',
        run=run,
    )
