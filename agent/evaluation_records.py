"""What an evaluation is made of: the judges of a run (:class:`Judges`), one evaluated question
(:class:`TrajectoryRecord`: its rollout, parsed trajectory, answer metrics, verdicts and reward) and the result of
the whole run (:class:`EvaluationResult`). :mod:`agent.evaluate` fills them; ``agent.evaluate`` exports them too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agent import judges as det
from agent.judge_client import ChatJudge
from agent.rollout import Question, Rollout
from scoring.aggregates import EvaluationReport, TrajectoryOutcome
from scoring.metrics import exact_match, flashrag_acc
from scoring.rewards.result import Reward
from scoring.trajectory import Trajectory
from scoring.verdicts import Verdict


@dataclass(slots=True)
class Judges:
    """The judges of a run. ``judge`` serves every LLM detector; ``under_search_judge`` overrides it for HiPRAG's
    verifier (the paper uses a reasoning model there); ``answer_judge`` turns on LLM-as-judge correctness."""

    judge: ChatJudge | None = None
    under_search_judge: ChatJudge | None = None
    answer_judge: ChatJudge | None = None
    plans: det.ReferencePlanStore = field(default_factory=det.InMemoryPlanStore)
    regeneration_batch_size: int = 64
    # HiPRAG's over-/under-search detectors from the evidence heuristic (scoring.judging.evidence) instead of an
    # LLM: no judge calls at all; the other detectors still use ``judge`` when one is set.
    evidence: bool = False
    # HiPRAG's own over-search test (Sec. 3.2, agent.judges.hiprag_over_search) in place of the evidence heuristic's
    # over-search rules, beside its under-search: each query is re-asked without retrieval to ``regenerator`` (a chat
    # client) or, when None, to the policy; ``judge`` compares the answer with the step's conclusion (Fig. 5's
    # prompt), or, when None, scoring.judging.reask's lexical match (no LLM). Set with ``evidence=True``.
    reask: bool = False
    regenerator: ChatJudge | None = None

    def all(self) -> list[ChatJudge]:
        found: list[ChatJudge] = []
        for judge in (self.judge, self.under_search_judge, self.answer_judge, self.regenerator):
            if judge is not None and all(judge is not other for other in found):
                found.append(judge)
        return found


@dataclass(slots=True)
class TrajectoryRecord:
    question: Question
    rollout: Rollout
    trajectory: Trajectory
    em: bool
    cem: bool
    f1: float
    verdicts: dict[str, list[det.JudgeResult]] = field(default_factory=dict)
    intermediate_answers: list[str] | None = None
    reward: Reward | None = None
    reward_error: str | None = (
        None  # why there is no reward (a verdict the reward needs is missing or an error)
    )

    @property
    def text(self) -> str:
        return self.rollout.text

    def flags(self, detector: str) -> tuple[Verdict | None, ...]:
        return tuple(result.verdict for result in self.verdicts.get(detector, []))

    def outcome(self) -> TrajectoryOutcome:
        intermediate = None
        if self.intermediate_answers is not None:
            intermediate = tuple(exact_match(a, self.question.golds) for a in self.intermediate_answers)
        return TrajectoryOutcome(
            dataset=self.question.dataset,
            cem=self.cem,
            em=self.em,
            f1=self.f1,
            format_ok=self.trajectory.valid,
            n_searches=self.trajectory.n_searches,
            over_search=self.flags(det.OVER_SEARCH),
            under_search=self.flags(det.UNDER_SEARCH),
            intermediate_correct=intermediate,
            over_search_rules=tuple(result.rule for result in self.verdicts.get(det.OVER_SEARCH, [])),
            acc=flashrag_acc(self.trajectory.answer, self.question.golds),
        )


@dataclass(slots=True)
class EvaluationResult:
    method: str
    records: list[TrajectoryRecord]
    report: EvaluationReport
    judge_stats: dict[str, dict[str, Any]]  # per judge model
    generation_tokens: dict[str, int]
    seconds: float

    @property
    def judge_errors(self) -> int:
        return sum(
            1
            for r in self.records
            for results in r.verdicts.values()
            for x in results
            if x.verdict is Verdict.ERROR
        )
