"""The adjudication kernel: importable without DSPy, short functions, and a bundle it never changes."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from clearmed.programs.adjudication import Mechanisms, adjudicate
from clearmed.signatures.records import (
    Agreement,
    Answer,
    Candidate,
    EvidenceBundle,
    FollowUpRound,
    Passage,
    Provenance,
    Thresholds,
    VerifierOutput,
)
from clearmed.testing import QUESTION

KERNEL = Path(__file__).resolve().parents[2] / "programs" / "adjudication"
MAX_FUNCTION_LINES = 60


def test_importing_the_kernel_loads_no_dspy_retrieval_or_backbone() -> None:
    script = (
        "import sys, clearmed.programs.adjudication\n"
        "heavy = [m for m in sys.modules if m.split('.')[0] in ('dspy', 'litellm', 'optuna')\n"
        "         or m.startswith(('clearmed.retrieval', 'clearmed.backbones'))]\n"
        "print(heavy)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_no_kernel_function_is_longer_than_sixty_lines() -> None:
    long = []
    for path in sorted(KERNEL.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    long.append(f"{path.name}:{node.name} ({length} lines)")
    assert long == []


class FollowingUpActions:
    """A verifier that asks once for more search, then keeps the local answer."""

    def __init__(self) -> None:
        self.rounds_seen: list[int] = []

    def verify(self, bundle: EvidenceBundle, agreement: Agreement) -> tuple[VerifierOutput, str]:
        self.rounds_seen.append(len(bundle.followups))
        if not bundle.followups:
            return VerifierOutput(route="needs_more_search"), "verifier"
        return VerifierOutput(answer=Answer.of_letters("A"), route="keep_local", confidence="high"), "verifier"

    def follow_up(self, bundle: EvidenceBundle, trigger: str) -> FollowUpRound:
        page = Passage(
            id="F1.1", text="t", pathway="dynamic", provenance=Provenance(kind="web", url="https://nih.gov/x")
        )
        return FollowUpRound(trigger=trigger, query="q", passages=[page])  # type: ignore[arg-type]

    def assess_guard(self, *args: object) -> None:
        raise AssertionError("no guard here")

    def assess_audit(self, *args: object) -> None:
        raise AssertionError("no audit here")


def test_a_followup_round_is_kept_beside_the_pathways_candidates_never_merged_into_them() -> None:
    candidates = [
        Candidate(pathway="parametric", answer=Answer.of_letters("A")),
        Candidate(pathway="local", answer=Answer.of_letters("A")),
        Candidate(pathway="dynamic", answer=Answer.of_letters("B"), passage_ids=["W1"]),
    ]
    bundle = EvidenceBundle(question=QUESTION, candidates=candidates)
    given = Agreement(parametric_local=True, parametric_dynamic=False, local_dynamic=False)
    actions = FollowingUpActions()
    result = adjudicate(bundle, given, Thresholds(), actions, Mechanisms(audit=False))  # type: ignore[arg-type]
    assert actions.rounds_seen == [0, 1]  # the second verification reads the bundle with the round beside it
    assert (result.answer, result.route) == (Answer.of_letters("A"), "keep_local")
    assert result.bundle.candidates == candidates  # as the pathways left them
    assert [r.passages[0].id for r in result.bundle.followups] == ["F1.1"]
    assert result.agreement == given  # the agreement adjudication was given
    assert bundle.followups == []  # and the input bundle is untouched
    assert result.steps[2].inputs is not None
    assert result.steps[2].inputs.followup_rounds == 1
