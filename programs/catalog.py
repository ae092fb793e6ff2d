"""The programs a user can name (`clearmed eval --program`, a suite's `programs`), each with what it runs.

`clearmed.api.assemble.build_program` builds them; a suite file is checked against this list before any cell runs.
"""

from __future__ import annotations

PROGRAMS: dict[str, str] = {
    "clear": "CLEAR: three pathways, verifier, guard, audit and follow-up search",
    "clear-no-followup": "CLEAR without targeted follow-up search (ablation)",
    "clear-no-guard": "CLEAR without the override guard (ablation)",
    "clear-no-audit": "CLEAR without the challenge audit (ablation)",
    "clear-heuristic": "CLEAR as its code's heuristic mode: the deterministic verifier, no LM call after the pathways",
    "clear-heuristic-contested": "CLEAR with the deterministic verifier, and the LM guard, audit and follow-up",
    "clear-judge": "CLEAR with the option-wise evidence judge answering the local and dynamic pathways",
    "clear-judge-explicit": "CLEAR with the option-wise judge extracting a knowledge graph first (explicit mode)",
    "clear-qpis": "CLEAR with query planning and iterative web search (QPIS)",
    "clear-judge-qpis": "CLEAR with the option-wise judge and QPIS",
    "direct": "Direct: the parametric pathway alone",
    "medrag": "MedRAG (BM25): the local pathway alone",
    "medrag-medcpt": "MedRAG (MedCPT): the local pathway alone, with MedCPT dense retrieval",
    "online": "online-only: the dynamic pathway alone",
}
