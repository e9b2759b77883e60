"""Evaluation-report metrics over many scored trajectories: answer accuracy, search behaviour, format rate.

Input is one :class:`TrajectoryOutcome` per trajectory (already scored: answer metrics from ``scoring.metrics``,
judge verdicts from the judges). :func:`evaluation_report` groups them by dataset and returns a
:class:`DatasetReport` per dataset plus two overall rows:

* ``overall`` (:data:`MICRO`) — every metric recomputed over all trajectories (and all steps) pooled. This is what
  HiPRAG's ``analysis.get_scores`` prints as "Total", and what HiPRAG's Table 4 "Avg." column is: its Avg. CEM
  matches the sample-weighted mean of the per-dataset CEMs (Llama-3B PPO baseline: plain mean 49.8, weighted by
  the seven test-set sizes 56.46, printed 56.4), not their plain mean. (Tables 5-6, OSR/USR, cannot be checked
  from the printed numbers: they would be weighted by step counts, which the paper does not give.)
* ``average`` (:data:`MACRO`) — the plain mean over datasets of each per-dataset metric. This is AutoSearch's
  Table 1 "Avg" (AutoSearch-3B: mean EM of the six datasets 44.25 → 44.3, mean SE 35.55 → 35.6) and HiPRAG's
  Table 12 "Avg." (Avg. #Searches, Search-R1 row: 17.17 / 7 = 2.45; HiPRAG row 1.75; its β-GRPO row, 2.15,
  matches neither mean of its printed values).

Metric definitions (each field of :class:`DatasetReport` says which paper it follows):

* CEM, EM, F1, format-correct rate: means over trajectories (HiPRAG §4.1 and Appendix F.1; AutoSearch §5.1).
* ``acc``: FlashRAG's accuracy (``scoring.metrics.flashrag_acc``, FlashRAG ``Sub_ExactMatch``), the number Search-R1
  (Table 2), TIRESRAG-R1 and AutoSearch report, a mean over the trajectories whose ``acc`` was measured
  (``TrajectoryOutcome.acc`` set); ``None`` when none was.
* OSR / USR, HiPRAG Eq. 2: micro-averaged over *steps*: over-searched search steps / judged search steps, and
  under-searched non-search steps / judged non-search steps. A step whose verdict is missing, unparseable or an
  error is counted in ``n_judge_errors`` and left out of both numerator and denominator — it is never read as
  "not over-searched". A zero denominator gives ``None`` (the rate is undefined); HiPRAG's released code prints 0
  instead, which :func:`get_scores_reference` reproduces.
* OSR without retrieval misses (``osr_redundant``, ours): OSR with the over-search flags that the evidence judge
  raised by its "no new supporting passage" rule (``scoring.judging.evidence.RETRIEVAL_MISS_RULES``, read from
  ``TrajectoryOutcome.over_search_rules``) counted as not over-searched; the denominator is OSR's. Equal to OSR
  for a judge that names no rule (an LLM judge).
* Average searches, HiPRAG Eq. 3: search steps per trajectory. AutoSearch's Search Depth (SD, "the number of
  search steps", §5.1) is the same quantity; :attr:`DatasetReport.search_depth` is an alias, not a second count.
* Search efficiency, AutoSearch §5.1: SE = EM / SD, the ratio of the two dataset-level means (Table 1:
  NQ 43.7 / 1.03 = 42.4). Both are fractions here, so SE is EM-per-search as a fraction; the paper prints EM in
  percent (multiply by 100 for its layout). ``None`` when SD is 0.
* AutoSearch's over-searching ratio (§3.1 and §5.1): "the proportion of samples correctly answered before the final
  search step" — a trajectory counts when the intermediate answer after some search step other than the last one
  has EM = 1 (AutoSearch Eq. 6's t_c exists and is < T−1). The denominator is the trajectories whose intermediate
  answers were measured (``intermediate_correct`` set); a trajectory with no search, or one search, cannot be
  over-searched but still counts in the denominator, as the paper's "proportion of samples" reads.

Papers silent, our choices: what a step flag of a format-invalid trajectory means (we aggregate whatever flags the
caller passes; HiPRAG's analysis judges no step of a trajectory that fails its format check); a macro average skips
datasets whose metric is ``None`` (an undefined rate is not a rate of 0).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scoring.judging.evidence import RETRIEVAL_MISS_RULES
from scoring.judging.hiprag import between
from scoring.metrics import cover_exact_match
from scoring.verdicts import Verdict

StepFlag = Verdict | bool | None
"""Is this step over-searched (resp. under-searched)? ``Verdict.TRUE``/``True`` = yes, ``Verdict.FALSE``/``False``
= no; ``None``, ``Verdict.UNPARSEABLE`` and ``Verdict.ERROR`` = no usable verdict (a judge error)."""

MICRO = "overall"
MACRO = "average"


@dataclass(frozen=True, slots=True)
class TrajectoryOutcome:
    """One scored trajectory, as the aggregates take it.

    ``over_search`` holds one flag per judged *search* step ("is this search unnecessary?"), ``under_search`` one
    per judged *non-search* step ("should this step have searched?"). Note the under-search flag is the negation of
    HiPRAG's judge question ("is this step correct?"): the judging layer turns the judge's answer into the flag.
    ``n_searches`` counts every search step, judged or not (HiPRAG Eq. 3).
    ``intermediate_correct`` is AutoSearch's EM of the intermediate answer after each search step, in order
    (Eq. 6), or ``None`` when no intermediate answers were generated. ``over_search_rules`` (optional, aligned with
    ``over_search``) names the rule a heuristic judge flagged each search step by (None: no rule named).
    """

    dataset: str
    cem: bool
    em: bool
    f1: float
    format_ok: bool
    n_searches: int
    over_search: tuple[StepFlag, ...] = ()
    under_search: tuple[StepFlag, ...] = ()
    intermediate_correct: tuple[bool, ...] | None = None
    over_search_rules: tuple[str | None, ...] = ()
    acc: bool | None = None  # FlashRAG's acc (scoring.metrics.flashrag_acc); None: not measured

    def __post_init__(self) -> None:
        if self.n_searches < 0:
            raise ValueError(f"n_searches must be >= 0, got {self.n_searches}")
        if not 0.0 <= self.f1 <= 1.0:
            raise ValueError(f"f1 must be in [0, 1], got {self.f1}")


@dataclass(frozen=True, slots=True)
class DatasetReport:
    """Metrics of one dataset (or of the pooled/averaged overall rows). Rates are fractions in [0, 1].

    Counts are totals over the trajectories the row covers (for the macro row too). A metric is ``None`` when it is
    undefined: no trajectory, no judged step of that kind, no measured intermediate answers, or zero search depth.
    """

    dataset: str
    n_trajectories: int
    cem: float | None  # HiPRAG §4.1 Cover Exact Match
    em: float | None
    f1: float | None
    format_ok_rate: float | None  # HiPRAG Appendix F.1
    osr: float | None  # HiPRAG Eq. 2, over-search rate (micro over steps)
    usr: float | None  # HiPRAG Eq. 2, under-search rate (micro over steps)
    n_search_steps: int  # search steps with a usable over-search verdict (OSR denominator)
    n_over_search: int
    n_non_search_steps: int  # non-search steps with a usable under-search verdict (USR denominator)
    n_under_search: int
    n_judge_errors: int  # steps whose verdict was missing, unparseable or an error (in no denominator)
    average_searches: float | None  # HiPRAG Eq. 3 (= AutoSearch SD)
    search_efficiency: float | None  # AutoSearch SE = EM / SD
    over_searching_ratio: float | None  # AutoSearch §5.1, sample-level
    n_over_searched_samples: int
    n_intermediate_measured: int  # trajectories with intermediate answers (its denominator)
    osr_redundant: float | None = None  # OSR without the evidence judge's retrieval misses (module docstring)
    n_retrieval_misses: int = 0  # over-search flags raised by a retrieval-miss rule
    acc: float | None = None  # FlashRAG's acc (Sub_ExactMatch): Search-R1 Table 2, TIRESRAG-R1, AutoSearch
    n_acc_measured: int = 0  # trajectories with a measured acc (its denominator)

    @property
    def search_depth(self) -> float | None:
        """AutoSearch's Search Depth: the same number as HiPRAG Eq. 3's average searches."""
        return self.average_searches


@dataclass(frozen=True, slots=True)
class EvaluationReport:
    datasets: tuple[DatasetReport, ...]  # sorted by dataset name
    overall_micro: DatasetReport  # all trajectories pooled (dataset == MICRO)
    average_macro: DatasetReport  # mean of the per-dataset metrics (dataset == MACRO)

    def rows(self) -> tuple[DatasetReport, ...]:
        """The table as the papers lay it out: one row per dataset, then the average row, then the pooled row."""
        return (*self.datasets, self.average_macro, self.overall_micro)


def rate(numerator: float, denominator: float) -> float | None:
    """``numerator / denominator``, or ``None`` when the denominator is 0 (the rate is undefined, not 0)."""
    return numerator / denominator if denominator else None


def flag_value(flag: StepFlag) -> bool | None:
    """A usable flag as a bool; ``None`` for a missing, unparseable or failed verdict."""
    if flag is None or isinstance(flag, bool):
        return flag
    if flag is Verdict.TRUE:
        return True
    if flag is Verdict.FALSE:
        return False
    return None


@dataclass(slots=True)
class _Tally:
    """Running sums for one row; every metric is a ratio of two of them, so rows pool by adding tallies."""

    n: int = 0
    cem: int = 0
    em: int = 0
    f1: float = 0.0
    format_ok: int = 0
    searches: int = 0
    search_steps: int = 0
    over: int = 0
    non_search_steps: int = 0
    under: int = 0
    judge_errors: int = 0
    misses: int = 0
    measured: int = 0
    over_searched_samples: int = 0
    acc: int = 0
    acc_measured: int = 0

    def add(self, outcome: TrajectoryOutcome) -> None:
        self.n += 1
        self.cem += outcome.cem
        self.em += outcome.em
        self.f1 += outcome.f1
        self.format_ok += outcome.format_ok
        self.searches += outcome.n_searches
        if outcome.acc is not None:
            self.acc_measured += 1
            self.acc += outcome.acc
        for i, flag in enumerate(outcome.over_search):
            value = flag_value(flag)
            if value is None:
                self.judge_errors += 1
            else:
                self.search_steps += 1
                self.over += value
                rule = outcome.over_search_rules[i] if i < len(outcome.over_search_rules) else None
                self.misses += bool(value and rule in RETRIEVAL_MISS_RULES)
        for flag in outcome.under_search:
            value = flag_value(flag)
            if value is None:
                self.judge_errors += 1
            else:
                self.non_search_steps += 1
                self.under += value
        if outcome.intermediate_correct is not None:
            self.measured += 1
            # Correct before the final search step: some intermediate answer other than the last one has EM = 1.
            self.over_searched_samples += any(outcome.intermediate_correct[:-1])

    def merge(self, other: _Tally) -> None:
        for name in self.__slots__:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def report(self, dataset: str) -> DatasetReport:
        em = rate(self.em, self.n)
        depth = rate(self.searches, self.n)
        return DatasetReport(
            dataset=dataset,
            n_trajectories=self.n,
            cem=rate(self.cem, self.n),
            em=em,
            f1=rate(self.f1, self.n),
            format_ok_rate=rate(self.format_ok, self.n),
            osr=rate(self.over, self.search_steps),
            usr=rate(self.under, self.non_search_steps),
            n_search_steps=self.search_steps,
            n_over_search=self.over,
            n_non_search_steps=self.non_search_steps,
            n_under_search=self.under,
            n_judge_errors=self.judge_errors,
            average_searches=depth,
            search_efficiency=None if em is None or not depth else em / depth,
            over_searching_ratio=rate(self.over_searched_samples, self.measured),
            n_over_searched_samples=self.over_searched_samples,
            n_intermediate_measured=self.measured,
            osr_redundant=rate(self.over - self.misses, self.search_steps),
            n_retrieval_misses=self.misses,
            acc=rate(self.acc, self.acc_measured),
            n_acc_measured=self.acc_measured,
        )


def _mean_of(
    reports: Sequence[DatasetReport], metric: Callable[[DatasetReport], float | None]
) -> float | None:
    values = [value for value in map(metric, reports) if value is not None]
    return sum(values) / len(values) if values else None


def macro_average(reports: Sequence[DatasetReport], dataset: str = MACRO) -> DatasetReport:
    """The papers' "Avg." row: each metric is the plain mean of the datasets' values (datasets where it is
    ``None`` are skipped); SE is the mean of the per-dataset SEs, as in AutoSearch Table 1; counts are summed."""
    return DatasetReport(
        dataset=dataset,
        n_trajectories=sum(r.n_trajectories for r in reports),
        cem=_mean_of(reports, lambda r: r.cem),
        em=_mean_of(reports, lambda r: r.em),
        f1=_mean_of(reports, lambda r: r.f1),
        format_ok_rate=_mean_of(reports, lambda r: r.format_ok_rate),
        osr=_mean_of(reports, lambda r: r.osr),
        usr=_mean_of(reports, lambda r: r.usr),
        n_search_steps=sum(r.n_search_steps for r in reports),
        n_over_search=sum(r.n_over_search for r in reports),
        n_non_search_steps=sum(r.n_non_search_steps for r in reports),
        n_under_search=sum(r.n_under_search for r in reports),
        n_judge_errors=sum(r.n_judge_errors for r in reports),
        average_searches=_mean_of(reports, lambda r: r.average_searches),
        search_efficiency=_mean_of(reports, lambda r: r.search_efficiency),
        over_searching_ratio=_mean_of(reports, lambda r: r.over_searching_ratio),
        n_over_searched_samples=sum(r.n_over_searched_samples for r in reports),
        n_intermediate_measured=sum(r.n_intermediate_measured for r in reports),
        osr_redundant=_mean_of(reports, lambda r: r.osr_redundant),
        n_retrieval_misses=sum(r.n_retrieval_misses for r in reports),
        acc=_mean_of(reports, lambda r: r.acc),
        n_acc_measured=sum(r.n_acc_measured for r in reports),
    )


def evaluation_report(outcomes: Iterable[TrajectoryOutcome]) -> EvaluationReport:
    """Per-dataset rows (sorted by name), the pooled ``overall`` row and the macro ``average`` row.

    >>> report = evaluation_report([
    ...     TrajectoryOutcome("nq", cem=True, em=True, f1=1.0, format_ok=True, n_searches=2,
    ...                       over_search=(True, False), under_search=(Verdict.ERROR,)),
    ...     TrajectoryOutcome("nq", cem=False, em=False, f1=0.0, format_ok=True, n_searches=0, under_search=(False,)),
    ... ])
    >>> row = report.datasets[0]
    >>> (row.cem, row.osr, row.usr, row.n_judge_errors, row.average_searches, row.search_efficiency)
    (0.5, 0.5, 0.0, 1, 1.0, 0.5)
    """
    tallies: dict[str, _Tally] = {}
    for outcome in outcomes:
        tally = tallies.get(outcome.dataset)
        if tally is None:
            tally = tallies[outcome.dataset] = _Tally()
        tally.add(outcome)
    pooled = _Tally()
    for tally in tallies.values():
        pooled.merge(tally)
    datasets = tuple(tallies[name].report(name) for name in sorted(tallies))
    return EvaluationReport(
        datasets=datasets, overall_micro=pooled.report(MICRO), average_macro=macro_average(datasets)
    )


# HiPRAG analysis.py labels each judged step with one of these strings.
_REFERENCE_STEP_LABELS = {
    "search": ("search", False),
    "oversearch": ("search", True),
    "non-search": ("non_search", False),
    "undersearch": ("non_search", True),
}


def _reference_rate(numerator: int, denominator: int) -> float | int:
    # The released code writes `x / y if y > 0 else 0`: an int 0, which prints as "0" where 0/2 prints "0.0".
    return numerator / denominator if denominator > 0 else 0


def get_scores_reference(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """HiPRAG ``analysis.get_scores`` (3e640365) on already-loaded JSONL rows: the lines it prints.

    One line ``"<data_source>: <acc>, over_search_rate: <OSR>, under_search_rate: <USR>"`` per data source in
    sorted order, then the same for ``Total`` (pooled over every row and step), values ``round(x, 3)``.
    Differences from :func:`evaluation_report` (REFERENCE.md §e):

    * accuracy is CEM (``scoring.metrics.cover_exact_match``, HiPRAG normalisation) of the last
      ``<answer>…</answer>`` span of ``result``; a row without one counts as wrong;
    * ``step_eval_results`` items other than the four labels are ignored, not counted as judge errors — a
      format-invalid row holds the string "Invalid response format, unable to evaluate", whose characters match no
      label, so it contributes no step;
    * a zero OSR/USR denominator prints ``0`` (paper mode: ``None``);
    * no rows at all raises ``ZeroDivisionError`` (the "Total" accuracy divides by ``len(data_list)``).
    """
    counts: dict[str, list[int]] = {}  # source -> [rows, correct, search, over, non_search, under]
    for row in rows:
        tally = counts.setdefault(row["data_source"], [0, 0, 0, 0, 0, 0])
        tally[0] += 1
        answers = between(row["result"], "<answer>", "</answer>")
        if answers and cover_exact_match(answers[-1], row["golden_answers"]):
            tally[1] += 1
        for label in row.get("step_eval_results", []) or ():
            kind, flagged = (
                _REFERENCE_STEP_LABELS.get(label, ("", False)) if isinstance(label, str) else ("", False)
            )
            if kind == "search":
                tally[3 if flagged else 2] += 1
            elif kind == "non_search":
                tally[5 if flagged else 4] += 1

    def line(name: str, n: int, correct: int, search: int, over: int, non_search: int, under: int) -> str:
        osr = round(_reference_rate(over, search + over), 3)
        usr = round(_reference_rate(under, non_search + under), 3)
        return f"{name}: {round(correct / n, 3)}, over_search_rate: {osr}, under_search_rate: {usr}"

    lines = [line(source, *counts[source]) for source in sorted(counts)]
    totals = [sum(column) for column in zip(*counts.values(), strict=True)] if counts else [0] * 6
    lines.append(line("Total", *totals))
    return lines
