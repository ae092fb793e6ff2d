"""The guard's and the audit's gates on the contest's own follow-up evidence, as the CLEAR code counts them
(`allow_second_search_override`, `_allow_online_challenge_override`), with the issue 31 reproductions as rows."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from clearmed.programs.adjudication import adjudicate
from clearmed.retrieval.memory import InMemoryWebSearch, web_passage
from clearmed.signatures.records import (
    Agreement,
    Answer,
    AuditAssessment,
    Candidate,
    EvidenceBundle,
    FollowUpRound,
    GuardAssessment,
    Passage,
    Provenance,
    QualityAssessment,
    QualityLabel,
    SourceQuality,
    StepError,
    Thresholds,
    VerifierOutput,
)
from clearmed.testing import (
    AUDIT_ALL_TRUE,
    FOLLOWUP_WEB,
    QUESTION,
    WEB,
    build_toy_program,
    label_all,
    pathway_replies,
    verifier_reply,
)

GRANT = GuardAssessment(
    supports_challenger=True,
    default_not_better_supported=True,
    aligned_with_question=True,
    supports_exact_option=True,
    no_unresolved_conflict=True,
    recommend_override=True,
)
ACCEPT = AuditAssessment(
    clearly_supports_challenger=True,
    aligned_with_question=True,
    supports_exact_option=True,
    default_not_better_supported=True,
    no_unresolved_conflict=True,
    recommend_override=True,
)


def page(pid: str, url: str, quality: QualityLabel) -> Passage:
    return Passage(id=pid, text="t", pathway="dynamic", quality=quality, provenance=Provenance(kind="web", url=url))


def counts(*pages: Passage) -> SourceQuality:
    return SourceQuality(assessments=[QualityAssessment(passage_id=p.id, label=p.quality or "low") for p in pages])


def found(*pages: Passage) -> FollowUpRound:
    return FollowUpRound(trigger="guard", query="q", passages=list(pages), source_quality=counts(*pages))


@dataclass
class Actions:
    """A verifier with a fixed route, a follow-up that returns `round_`, assessments that always say yes."""

    route: str
    round_: FollowUpRound
    assessed: list[str] = field(default_factory=list)

    def verify(self, bundle: EvidenceBundle, agreement: Agreement) -> tuple[VerifierOutput, str]:
        return VerifierOutput(answer=Answer.of_letters("B"), route=self.route, confidence="high"), "verifier"  # type: ignore[arg-type]

    def follow_up(self, bundle: EvidenceBundle, trigger: str) -> FollowUpRound:
        return self.round_.model_copy(update={"trigger": trigger})

    def assess_guard(self, *args: object) -> GuardAssessment | StepError:
        self.assessed.append("guard")
        return GRANT

    def assess_audit(self, *args: object) -> AuditAssessment | StepError:
        self.assessed.append("audit")
        return ACCEPT


def contest(answers: tuple[str | None, str | None, str], route: str, round_: FollowUpRound) -> tuple[str, Actions]:
    """Adjudicate three pathway answers whose initial web results are two high and two medium pages."""
    pathways = ("parametric", "local", "dynamic")
    candidates = [
        Candidate(pathway=p, answer=Answer.of_letters(a)) if a else Candidate(pathway=p)  # type: ignore[arg-type]
        for p, a in zip(pathways, answers, strict=True)
    ]
    initial = [page(f"W{i}", f"https://site{i}.org", q) for i, q in enumerate(("high", "high", "medium", "medium"), 1)]
    bundle = EvidenceBundle(
        question=QUESTION,
        candidates=candidates,
        dynamic_passages=initial,
        source_quality=counts(*initial),
    )

    def agree(x: str | None, y: str | None) -> bool | None:
        return None if x is None or y is None else x == y

    p, lo, d = answers
    agreement = Agreement(parametric_local=agree(p, lo), parametric_dynamic=agree(p, d), local_dynamic=agree(lo, d))
    actions = Actions(route, round_)
    result = adjudicate(bundle, agreement, Thresholds(), actions)  # type: ignore[arg-type]
    return result.rule, actions


NIH = page("F1.1", "https://www.nih.gov/a", "high")
FORUM = page("F1.1", "https://www.reddit.com/r/x", "low")
MEDIUM = [page("F1.1", "https://a.org", "medium"), page("F1.2", "https://b.org", "medium")]


@pytest.mark.parametrize(
    ("round_", "rule"),
    [
        (found(NIH), "guard_granted"),
        # the follow-up's only new page is a forum post labelled low: granted before, on the first search's counts
        (found(FORUM), "guard_rejected_followup_few_high_quality"),
        (found(*MEDIUM), "guard_rejected_followup_few_high_quality"),  # the guard's bar is a high source
        (found(), "guard_rejected_no_followup_evidence"),
    ],
)
def test_the_guard_counts_its_own_follow_up(round_: FollowUpRound, rule: str) -> None:
    decided, actions = contest(("A", "A", "B"), "accept_dynamic", round_)
    assert decided == rule
    assert actions.assessed == (["guard"] if rule == "guard_granted" else [])


@pytest.mark.parametrize(
    ("round_", "rule"),
    [
        (found(NIH), "audit_accepted"),
        (found(*MEDIUM), "audit_accepted"),  # n_medium >= 2 in the follow-up
        # `followup | 0 results`: accepted before, on the first search's two high pages
        (found(), "audit_rejected_evidence_counts"),
        (found(FORUM), "audit_rejected_evidence_counts"),
        (found(MEDIUM[0]), "audit_rejected_evidence_counts"),
    ],
)
def test_the_audit_counts_its_own_follow_up(round_: FollowUpRound, rule: str) -> None:
    decided, actions = contest(("A", "A", "B"), "consensus", round_)
    assert decided == rule
    assert actions.assessed == (["audit"] if rule == "audit_accepted" else [])


@pytest.mark.parametrize(
    ("answers", "guarded"),
    [
        (("A", "A", "B"), True),  # P = L != D
        (("A", "C", "B"), True),  # all three differ
        (("A", None, "B"), False),  # the local pathway failed: the CLEAR code does not guard
        ((None, "A", "B"), False),
    ],
)
def test_the_guard_fires_only_on_a_consensus_or_a_three_way_conflict(
    answers: tuple[str | None, str | None, str], guarded: bool
) -> None:
    decided, actions = contest(answers, "accept_dynamic", found(NIH))
    assert (decided == "guard_granted", actions.assessed) == (guarded, ["guard"] if guarded else [])
    if not guarded:
        assert decided == "verifier"


# ------------------------------------------------------------------------------------------- the live assessor

ONLY_FOLLOWUP = web_passage("p4", "https://www.thyroid.org/hypo", "Hypothyroidism | ATA", "a high TSH, low free T4")
AUDIT_SCRIPT = {
    **pathway_replies("B", "B", "A"),
    "source_quality": label_all("high"),
    "verifier": verifier_reply("consensus", answer="B"),
    "followup_query": {"query": "hypothyroidism TSH"},
}


def test_the_audit_reads_only_its_follow_up_rounds_pages() -> None:
    program, engine, _ = build_toy_program(
        {**AUDIT_SCRIPT, "audit": AUDIT_ALL_TRUE}, web=InMemoryWebSearch([*WEB, *FOLLOWUP_WEB, ONLY_FOLLOWUP])
    )
    decision = program(question=QUESTION).decision
    assert decision.deciding_rule == "audit_accepted"
    prompt = next(c for c in engine.calls if c.stage == "audit").user
    assert "[F1.1]" in prompt
    assert "[W1]" not in prompt  # the first search's pages decided the route; the audit rules on the follow-up
    assert "high=2, medium=0, low=0" in prompt  # the round's own counts


def test_an_audit_reply_missing_a_condition_is_read_field_by_field_not_failed() -> None:
    partial = {k: v for k, v in AUDIT_ALL_TRUE.items() if k != "no_unresolved_conflict"}
    program, _, _ = build_toy_program(
        {**AUDIT_SCRIPT, "audit": partial}, web=InMemoryWebSearch([*WEB, *FOLLOWUP_WEB, ONLY_FOLLOWUP])
    )
    decision = program(question=QUESTION).decision
    # Before: audit_assessment_failed, and the audit never ran. Now it runs; the unreadable condition does not hold.
    assert decision.deciding_rule == "audit_rejected_not_clearly_supported"
    step = next(s for s in decision.steps if s.mechanism == "audit")
    assert step.audit is not None
    assert step.audit.clearly_supports_challenger is True
    assert step.audit.no_unresolved_conflict is False
    assert "not readable, so taken as not holding: no_unresolved_conflict" in step.audit.rationale
