"""agent.evaluate's TrajectoryRecord → the trajectories app's TrajectoryInput (steps, verdicts, rewards)."""

from __future__ import annotations

import json
from dataclasses import asdict, is_dataclass

from agent import judges as det
from agent.evaluate import TrajectoryRecord
from scoring.verdicts import Verdict
from webapp.trajectories.services import TrajectoryInput, VerdictInput

# Stored verdict outcomes. An unparseable reply and a failed call are both "error" (never a silent "no"); the
# raw reply, or the error text, says which. A graded detector's usable reply (thinking, path) is "true" with
# its score.
_OUTCOMES = {
    Verdict.TRUE: "true",
    Verdict.FALSE: "false",
    Verdict.UNPARSEABLE: "error",
    Verdict.ERROR: "error",
    None: "true",
}
# reference_plan is not a verdict on this trajectory: the plan is kept in evaluation.ReferencePlan, and a
# failed plan shows up as the path verdict's error ("no reference plan for this question").
_SKIPPED_DETECTORS = {det.REFERENCE_PLAN}


def _raw_reply(result: det.JudgeResult) -> str:
    if result.verdict is Verdict.ERROR:
        return f"error: {result.error or 'unknown'}"
    text = result.reply or ""
    if result.verdict is Verdict.UNPARSEABLE:
        return f"unparseable ({result.error or 'not in the expected format'}): {text}"
    if result.verdict is None and result.value is not None and is_dataclass(result.value) and not text:
        return json.dumps(asdict(result.value))  # type: ignore[arg-type]
    return text


def _score(result: det.JudgeResult) -> float | None:
    if result.score is not None:
        return result.score
    planner_score = getattr(result.value, "planner_score", None)  # Search-P1's evaluation: r_planner
    return float(planner_score) if planner_score is not None else None


def verdict_inputs(record: TrajectoryRecord) -> list[VerdictInput]:
    verdicts = []
    for detector, results in record.verdicts.items():
        if detector in _SKIPPED_DETECTORS:
            continue
        for result in results:
            verdicts.append(
                VerdictInput(
                    detector=detector,
                    outcome=_OUTCOMES[result.verdict],
                    judge_model=result.model,
                    step_index=result.step_index,
                    score=_score(result),
                    raw_reply=_raw_reply(result),
                    latency_ms=round(result.latency * 1000),
                    prompt_tokens=result.prompt_tokens,
                    completion_tokens=result.completion_tokens,
                )
            )
    return verdicts


def trajectory_input(record: TrajectoryRecord, *, run_id: int, dataset_id: int) -> TrajectoryInput:
    question = record.question
    reward = record.reward
    regenerated = {
        r.step_index: r.regenerated
        for r in record.verdicts.get(det.OVER_SEARCH, [])
        if r.step_index is not None and r.regenerated is not None
    }
    # AutoSearch: one self-answer after each retrieval step, i.e. after every step but the last (agent.judges).
    intermediate = dict(enumerate(record.intermediate_answers or []))
    return TrajectoryInput(
        parsed=record.trajectory,
        golden_answers=list(question.golds),
        question_text=question.text,
        question_id=int(question.id),
        dataset_id=dataset_id,
        run_id=run_id,
        total_reward=reward.total if reward is not None else None,
        reward_components={k: float(v) for k, v in reward.components.items()} if reward else {},
        step_rewards=list(reward.step_rewards) if reward is not None and reward.step_rewards else None,
        verdicts=verdict_inputs(record),
        regenerated_answers=regenerated,
        intermediate_answers=intermediate,
        end_reason=record.rollout.end,
        cut_turns=record.rollout.cut_turns,
    )
