from __future__ import annotations

from typing import get_args

from clearmed.signatures.grading import GradeDiagnosis, GradeRubricItem, GradeTreatment


def test_free_text_judges_share_fields_and_a_three_way_verdict() -> None:
    for signature in (GradeDiagnosis, GradeTreatment):
        assert list(signature.input_fields) == ["case", "reference_answer", "candidate_answer"]
        assert list(signature.output_fields) == ["verdict", "rationale"]
        verdict = signature.output_fields["verdict"].annotation
        assert set(get_args(verdict)) == {"correct", "partially_correct", "incorrect"}
    assert "aliases" not in GradeTreatment.instructions
    assert "alias" in GradeDiagnosis.instructions


def test_rubric_grader_outputs_a_bool() -> None:
    assert list(GradeRubricItem.input_fields) == ["conversation", "rubric_item"]
    assert GradeRubricItem.output_fields["criteria_met"].annotation is bool
    assert "negative points" in GradeRubricItem.instructions
