"""The report table in the papers' layout, for the HTML page and the management command alike.

Rates are stored as fractions and shown in percent, as the papers print them. Search efficiency (AutoSearch
§5.1, SE = EM / SD) is printed with EM in percent too (NQ: 43.7 / 1.03 = 42.4). Average searches (HiPRAG Eq. 3)
and AutoSearch's search depth are one quantity (scoring.aggregates), so they share one column.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scoring.aggregates import MACRO, MICRO
from scoring.metrics import flashrag_acc


@dataclass(frozen=True, slots=True)
class Column:
    key: str
    title: str
    percent: bool = True
    help: str = ""


COLUMNS = (
    Column("cem", "CEM", help="cover exact match: a gold answer appears in the answer (HiPRAG §4.1)"),
    Column(
        "acc",
        "acc (FlashRAG)",
        help="FlashRAG's acc (Sub_ExactMatch): a gold answer appears in the answer after SQuAD's normalization, "
        "which deletes punctuation (U.S.A. covers USA) where CEM's makes it a space; the accuracy Search-R1, "
        "TIRESRAG-R1 and AutoSearch report",
    ),
    Column("em", "EM", help="exact match"),
    Column("f1", "F1", help="token F1"),
    Column("osr", "OSR", help="over-search rate: over-searched / judged search steps (HiPRAG Eq. 2)"),
    Column("usr", "USR", help="under-search rate: under-searched / judged non-search steps (HiPRAG Eq. 2)"),
    Column(
        "average_searches",
        "#Search (SD)",
        percent=False,
        help="average searches per question (HiPRAG Eq. 3) = AutoSearch's search depth",
    ),
    Column("search_efficiency", "SE", help="search efficiency EM / SD, EM in percent (AutoSearch §5.1)"),
    Column("format_ok_rate", "Format %", help="trajectories in the method's format (HiPRAG Appendix F.1)"),
    Column(
        "osr_redundant",
        "OSR w/o misses",
        help="OSR with the evidence judge's retrieval misses (rule no_new_support) counted as not over-searched "
        "(docs/judges.md); equals OSR for judges that name no rule",
    ),
)
ROW_LABELS = {MACRO: "Avg.", MICRO: "All (pooled)"}
ROW_HELP = {
    MACRO: "plain mean of the dataset rows (AutoSearch Table 1's Avg)",
    MICRO: "every trajectory pooled (HiPRAG Table 4's Avg.)",
}


def stored_acc(final_answer: str | None, golden_answers: Sequence[str] | None) -> bool | None:
    """FlashRAG's ``acc`` of a stored trajectory (``scoring.metrics.flashrag_acc``); ``None`` without golds, as a
    stored CEM is."""
    if not golden_answers:
        return None
    return flashrag_acc(final_answer, golden_answers)


def cell(value: float | None, column: Column) -> str:
    if value is None:
        return "—"
    return f"{100 * value:.1f}" if column.percent else f"{value:.2f}"


@dataclass(frozen=True, slots=True)
class TableRow:
    label: str
    aggregate: bool
    n_trajectories: int
    cells: tuple[str, ...]
    n_judge_errors: int
    help: str = ""


def report_table(rows: Iterable[Mapping[str, Any]]) -> list[TableRow]:
    """Stored report rows (DatasetReport fields) → display rows, in the stored order."""
    return [
        TableRow(
            label=ROW_LABELS.get(row["dataset"], row["dataset"]),
            aggregate=row["dataset"] in ROW_LABELS,
            n_trajectories=row["n_trajectories"],
            cells=tuple(cell(row.get(c.key), c) for c in COLUMNS),
            n_judge_errors=row.get("n_judge_errors", 0),
            help=ROW_HELP.get(row["dataset"], ""),
        )
        for row in rows
    ]


def report_text(rows: Iterable[Mapping[str, Any]]) -> str:
    """The table as fixed-width text: one row per dataset, then Avg. and the pooled row."""
    table = report_table(rows)
    header = ("Dataset", "N", *(c.title for c in COLUMNS), "Judge err.")
    lines = [(r.label, str(r.n_trajectories), *r.cells, str(r.n_judge_errors)) for r in table]
    widths = [max(len(str(line[i])) for line in (header, *lines)) for i in range(len(header))]

    def fmt(values: tuple[str, ...]) -> str:
        first = values[0].ljust(widths[0])
        rest = (v.rjust(w) for v, w in zip(values[1:], widths[1:], strict=True))
        return "  ".join((first, *rest))

    rule = "-" * len(fmt(header))
    out = [fmt(header), rule]
    for row, line in zip(table, lines, strict=True):
        if row.aggregate and out[-1] != rule:
            out.append(rule)
        out.append(fmt(line))
    return "\n".join(out)
