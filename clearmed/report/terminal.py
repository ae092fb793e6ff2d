"""Terminal rendering of a Decision: the answer first, then the trail that justifies it."""

from __future__ import annotations

from collections import defaultdict

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from clearmed.core.sanitize import clean_text
from clearmed.signatures.records import ROUTE_TABLE, Candidate, Decision, Passage


def _plain(*values: str) -> list[Text]:
    """Cells from data (questions, evidence, model output): shown literally, never read as Rich markup, so a
    web page containing "[/bold]" cannot crash the view or plant a hyperlink, and never with control codes."""
    return [Text(clean_text(value)) for value in values]


def _answer_text(decision: Decision) -> Text:
    question = decision.bundle.question
    if decision.answer is None:
        return Text(f"no answer ({decision.status})", style="bold red")
    if decision.answer.letters and question.options:
        body = "; ".join(f"{letter}. {question.options[letter]}" for letter in decision.answer.letters)
    else:
        body = decision.answer.display()
    return Text(clean_text(body), style="bold")


def _headline(decision: Decision) -> Panel:
    route = decision.route or "-"
    lines = Text.assemble(
        ("Answer: ", "bold"),
        _answer_text(decision),
        "\n",
        ("Route: ", "bold"),
        (route, ROUTE_TABLE[route].style if route in ROUTE_TABLE else "white"),
        f"   confidence {decision.confidence}   rule {decision.deciding_rule or '-'}",
    )
    if decision.response:
        lines.append(f"\n\n{clean_text(decision.response)}")
    if decision.rationale:
        lines.append(f"\n\nWhy: {clean_text(decision.rationale)}", style="italic")
    if decision.error:
        lines.append(f"\n\nError: {clean_text(decision.error)}", style="red")
    title = f"{decision.question_id}: {decision.bundle.question.text[:90]}"
    return Panel(lines, title=_plain(title)[0], title_align="left")


def _candidate_row(candidate: Candidate) -> tuple[str, str, str, str]:
    answer = candidate.answer.display() if candidate.answer else "-"
    source = candidate.retriever or candidate.search_backend or candidate.model or ""
    note = candidate.rationale
    if candidate.error is not None:
        note = f"[{candidate.error.kind}] {candidate.error.message}"
    cited = f" (cites {', '.join(candidate.cited_passage_ids)})" if candidate.cited_passage_ids else ""
    return candidate.pathway, answer, source, (note + cited)[:240]


def _pathways(decision: Decision) -> Table:
    table = Table(title="Pathways", title_justify="left", expand=True)
    for column in ("pathway", "answer", "source", "rationale / error"):
        table.add_column(column, overflow="fold")
    for candidate in decision.bundle.candidates:
        table.add_row(*_plain(*_candidate_row(candidate)))
    return table


def origin_of(passage: Passage, *, full_url: bool = False) -> str:
    """Where a passage came from, as shown to a reader: "corpus:doc_id" for local evidence; for a web page its
    domain and publication date (the terminal's narrow column) or, with `full_url` (the HTML report, which links
    it), its address, "<url>, <date>"."""
    prov = passage.provenance
    if prov.kind != "web":
        return f"{prov.corpus or 'corpus'}:{prov.doc_id or passage.id}"
    if full_url:
        where, separator = prov.url or prov.domain or "web", ", "
    else:
        where, separator = str(prov.domain or prov.url), " "
    return f"{where}{separator}{prov.published.isoformat()}" if prov.published else where


def _passages(decision: Decision, limit: int) -> Table:
    bundle = decision.bundle
    cited = {pid for c in bundle.candidates for pid in c.cited_passage_ids}
    table = Table(title="Evidence (* = cited by a pathway)", title_justify="left", expand=True)
    for column in ("id", "source", "quality", "text"):
        table.add_column(column, overflow="fold")
    passages = [*bundle.local_passages, *bundle.all_dynamic_passages()]
    for passage in passages[:limit]:
        mark = "*" if passage.id in cited else ""
        table.add_row(*_plain(f"{passage.id}{mark}", origin_of(passage), passage.quality or "", passage.text[:160]))
    if len(passages) > limit:
        table.caption = f"{len(passages) - limit} more passages in --json output"
    return table


def _trail(decision: Decision) -> Table:
    table = Table(title="Adjudication trail", title_justify="left", expand=True)
    for column in ("#", "mechanism", "trigger", "rule", "outcome"):
        table.add_column(column, overflow="fold")
    for index, step in enumerate(decision.steps, start=1):
        outcome = step.outcome
        if step.error is not None:
            outcome = f"{outcome} [error {step.error.kind}: {step.error.message[:120]}]".strip()
        table.add_row(*_plain(str(index), step.mechanism, step.trigger, step.rule, outcome))
    return table


def _usage(decision: Decision) -> Table:
    per_stage: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0, 0, 0.0, 0])
    for row in decision.usage:
        totals = per_stage[(row.stage, row.role)]
        totals[0] += row.calls if not row.cached else 0
        totals[1] += row.prompt_tokens
        totals[2] += row.completion_tokens
        totals[3] += row.seconds
        totals[4] += 1 if row.cached else 0
    table = Table(title="Cost", title_justify="left")
    for column in ("stage", "role", "calls", "prompt tok", "output tok", "seconds", "cache hits"):
        table.add_column(column, justify="right" if column not in ("stage", "role") else "left")
    for (stage, role), (calls, prompt, completion, seconds, hits) in per_stage.items():
        table.add_row(
            stage, role, str(int(calls)), str(int(prompt)), str(int(completion)), f"{seconds:.1f}", str(int(hits))
        )
    total = decision.total_usage()
    table.add_row(
        "total",
        "",
        str(total.calls),
        str(total.prompt_tokens),
        str(total.completion_tokens),
        f"{total.seconds:.1f}",
        "",
        style="bold",
    )
    return table


def render_decision(decision: Decision, console: Console, *, passages: int = 12) -> None:
    console.print(
        Group(
            _headline(decision), _pathways(decision), _passages(decision, passages), _trail(decision), _usage(decision)
        )
    )
