"""A pathway whose answers were recorded by an earlier run: it hands back the recorded candidate and calls no LM.

Put in the place of a live pathway (`CLEAR.parametric`, `.local`, `.dynamic`, or a baseline's `.pathway`), it lets
CLEAR adjudicate answers that MIRAGE, the CLEAR authors' code or an earlier clearmed run recorded, while the
adjudication itself (verifier, follow-up search, guard, audit, format gate) runs live. `AbsentPathway` is a pathway
left out by choice: its candidate says so (`not_run`), which is neither a failure nor a degraded stage. A clearmed
run's candidate comes back whole, its option scores with it (`Candidate.option_scores`), so the calibrated and
learned verifiers read on replay what they read live; where a record has none, the learned verifier falls back
and says so (`scores_absent`).
"""

from __future__ import annotations

from collections.abc import Mapping

import dspy

from clearmed.signatures.records import Candidate, PathwayName, Question, StepError
from clearmed.signatures.records.results import PathwayResult


class RecordedAnswers(dspy.Module):
    """The recorded result of one pathway for each question id (its candidate, and the evidence it read where that
    was recorded), from `source` (a folder or file, for the trail)."""

    def __init__(self, pathway: PathwayName, results: Mapping[str, PathwayResult], source: str) -> None:
        super().__init__()
        self.pathway_name = pathway
        self.results = dict(results)
        self.source = source

    def forward(self, question: Question) -> PathwayResult:
        result = self.results.get(question.id)
        if result is None:
            error = StepError(
                stage=self.pathway_name, kind="parse_error", message=f"no recorded answer in {self.source}"
            )
            result = PathwayResult(candidate=Candidate(pathway=self.pathway_name, error=error))
        return result


class AbsentPathway(dspy.Module):
    """A pathway not run, by the user's choice."""

    def __init__(self, pathway: PathwayName) -> None:
        super().__init__()
        self.pathway_name = pathway

    def forward(self, question: Question) -> PathwayResult:
        error = StepError(stage=self.pathway_name, kind="not_run", message="not run (absent by choice)")
        return PathwayResult(candidate=Candidate(pathway=self.pathway_name, error=error))
