"""The nouns of clearmed: every record that crosses a module boundary.

Read this package first. One question flows through the program as a `Question` (question.py), becomes three
`Candidate`s (parametric, local, dynamic) with their `Passage`s (evidence.py), is judged by the aggregation
verifier (`VerifierOutput`, candidates.py) whose routes are defined in routes.py, adjudicated by pure rules
(`AdjudicationStep`s) and ends as a `Decision` (adjudication.py), which carries everything needed to replay
the adjudication layer without re-running the pathways.
"""

from clearmed.signatures.records.adjudication import (
    AdjudicationStep,
    AuditAssessment,
    Contest,
    Decision,
    DecisionStatus,
    GuardAssessment,
    Thresholds,
    VerifierInputs,
)
from clearmed.signatures.records.base import (
    PATHWAYS,
    QUALITY_RANK,
    AnswerMode,
    Confidence,
    DomainTier,
    MetadataValue,
    OnError,
    PathwayName,
    QualityLabel,
    QualityOrigin,
    Record,
)
from clearmed.signatures.records.candidates import (
    Agreement,
    CalibratedFallback,
    Candidate,
    EvidenceBundle,
    FollowUpRound,
    LearnedFallback,
    LearnedVerdict,
    OptionScores,
    SupportScope,
    VerifierOutput,
    VerifierVerdict,
    page_key,
    top_options,
)
from clearmed.signatures.records.evidence import Passage, Provenance, QualityAssessment, SourceQuality
from clearmed.signatures.records.judgment import (
    GraphCleanup,
    GraphEntity,
    GraphRelation,
    JudgeDecision,
    JudgeMode,
    KnowledgeGraph,
    OptionJudgment,
    OptionVerdict,
    SemanticGroup,
    Verdict,
)
from clearmed.signatures.records.question import Answer, ChatTurn, Question, RubricItem
from clearmed.signatures.records.results import (
    AgreementResult,
    GateResult,
    JudgeResult,
    PathwayResult,
    QualityResult,
    ResponseResult,
    SearchResult,
    VerifierResult,
    WebQueryResult,
)
from clearmed.signatures.records.routes import (
    NEEDS_MORE_SEARCH,
    ROUTE_TABLE,
    Mechanism,
    Route,
    RouteSpec,
    RuleId,
    route_for,
    route_meanings,
    route_spec,
)
from clearmed.signatures.records.search_plan import SearchPlan, SearchRound
from clearmed.signatures.records.usage import CallUsage, ErrorKind, StepError
