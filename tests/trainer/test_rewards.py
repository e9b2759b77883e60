from __future__ import annotations

import random
from types import SimpleNamespace

import pytest

from scoring.rewards.tiresrag import dynamic_weight
from scoring.scorer import score
from trainer.config import ConfigError
from trainer.rewards import MethodReward, ScoreLedger
from trainer.scripted import scripted_parts


@pytest.mark.parametrize("method", ["search_r1", "hiprag", "autosearch", "search_p1", "tiresrag"])
def test_it_scores_every_method_as_scoring_does(method: str) -> None:
    rng = random.Random(3)
    samples = [scripted_parts(method, rng, "Paris") for _ in range(6)]
    texts = ["".join(text for text, _ in parts) for parts, _ in samples]
    judgements = [j for _, j in samples]
    ledger = ScoreLedger()
    reward = MethodReward(method, ledger=ledger)
    state = SimpleNamespace(global_step=4, max_steps=10)

    totals = reward(
        ["Q?"] * 6,
        texts,
        golden_answers=[["Paris"]] * 6,
        trajectory_text=texts,
        judgements=judgements,
        trainer_state=state,
    )

    params = {"step": 5, "total_steps": 10} if method == "tiresrag" else {}
    expected = [
        score(method, t, ["Paris"], params=params, judgements=j).reward.total
        for t, j in zip(texts, judgements, strict=True)
    ]
    assert totals == pytest.approx(expected)
    assert [s.reward.total for s in ledger.latest] == pytest.approx(expected)
    assert all(s.reward.components for s in ledger.latest)
    if method == "tiresrag":  # a_t follows the trainer's step: t = global_step + 1 (TIRESRAG §4.3)
        assert ledger.latest[0].reward.components["dynamic_weight"] == pytest.approx(dynamic_weight(5, 10))


def test_it_leaves_a_completion_without_its_judge_outcome_unscored() -> None:
    text = (
        "<think>\n<step>\n    <reasoning>r</reasoning>\n    <search>q</search>\n    <context>c</context>\n"
        "    <conclusion>Paris</conclusion>\n</step>\n</think>\n<answer>Paris</answer>"
    )
    ledger = ScoreLedger()
    reward = MethodReward("hiprag", ledger=ledger)
    # Correct and well-formed, so the bonus needs the over-search verdict; the judge call failed.
    totals = reward(["Q?"], [text], golden_answers=[["Paris"]], judgements=[{"step_flags": ["error"]}])
    # TRL: NaN, out of the baseline, zero advantage — never read as "not over-searched".
    assert totals == [None]
    assert "MissingVerdict" in (ledger.latest[0].error or "")


def test_it_takes_judge_outcomes_from_a_judge_function() -> None:
    text = "<think>x</think>\n<search> q </search>\n\n<information>d</information>\n\n<think>y</think>\n<answer> Paris </answer>"
    seen = []

    def judge(requests):  # type: ignore[no-untyped-def]
        seen.extend(requests)
        return [{"intermediate_answers": ["Paris"]} for _ in requests]

    totals = MethodReward("autosearch", judge=judge)(["Q?"], [text], golden_answers=[["Paris"]])
    assert totals[0] == pytest.approx(
        score("autosearch", text, ["Paris"], judgements={"intermediate_answers": ["Paris"]}).reward.total
    )
    assert seen[0].golds == ("Paris",) and seen[0].trajectory.n_searches == 1


def test_it_rejects_bad_weights_at_construction() -> None:
    with pytest.raises(ConfigError) as error:
        MethodReward("hiprag", params={"lambda_f": 3.0})
    assert error.value.field == "reward.params.lambda_f"
    with pytest.raises(ConfigError, match=r"reward\.params\.nope"):
        MethodReward("search_r1", params={"nope": 1})


def test_step_metrics_plot_judge_errors_and_search_efficiency_beside_osr() -> None:
    """The run page's process charts: judge errors per step (0 too once steps are judged, never folded into
    "no") and AutoSearch's search efficiency (EM / depth)."""
    from scoring.formats import parse
    from scoring.verdicts import Verdict
    from trainer.callbacks import score_metrics
    from trainer.rewards import SampleScore

    text = (
        "<think>find it</think><search>capital of France</search>"
        "<information>Doc 1(Title: Paris) Paris is the capital of France.</information>"
        "<answer>Paris</answer>"
    )
    trajectory = parse("search_r1", text)

    def sample(over: Verdict | None, em: bool) -> SampleScore:
        return SampleScore(
            prompt="q",
            row={},
            text=text,
            golds=("Paris",),
            trajectory=trajectory,
            reward=None,
            error=None,
            judgements={},
            cem=em,
            em=em,
            f1=float(em),
            over_search=(over,),
        )

    metrics = score_metrics([sample(Verdict.TRUE, True), sample(Verdict.UNPARSEABLE, False)])
    assert metrics["judge_errors"] == 1.0  # the unparseable verdict: counted as an error, not as "no"
    assert metrics["osr"] == 1.0  # over the one usable verdict
    assert metrics["search_efficiency"] == pytest.approx(0.5 / 1.0)  # EM 0.5 over one search per trajectory
    assert score_metrics([sample(Verdict.FALSE, True)])["judge_errors"] == 0.0


HIPRAG_SEARCH_ONLY = (
    "<think>\n<step>\n    <reasoning>r</reasoning>\n    <search>capital of France</search>\n"
    "    <context>Doc 1(Title: France) Paris</context>\n    <conclusion>Paris</conclusion>\n</step>\n</think>\n"
    "<answer>Paris</answer>"
)
HIPRAG_NON_SEARCH = (
    "<think>\n<step>\n    <reasoning>r</reasoning>\n    <search>capital of France</search>\n"
    "    <context>Doc 1(Title: France) Paris</context>\n    <conclusion>Paris</conclusion>\n</step>\n"
    "<step>\n    <reasoning>I know it.</reasoning>\n    <conclusion>Paris</conclusion>\n</step>\n"
    "<step>\n    <reasoning>Still.</reasoning>\n    <conclusion>Rome</conclusion>\n</step>\n</think>\n"
    "<answer>Paris</answer>"
)


def test_under_only_gives_a_correct_search_only_rollout_the_batch_average_bonus() -> None:
    # The run used to die here: score() raised a bare ValueError the adapter does not catch (issue 21).
    ledger = ScoreLedger()
    reward = MethodReward("hiprag", params={"process": "under_only"}, ledger=ledger)
    totals = reward(
        ["Q?"] * 3,
        [HIPRAG_SEARCH_ONLY, HIPRAG_NON_SEARCH, HIPRAG_NON_SEARCH],
        golden_answers=[["Paris"]] * 3,
        judgements=[
            {"step_flags": [True]},
            {"step_flags": [False, False, True]},
            {"step_flags": [False] * 3},
        ],
    )
    # under_only (HiPRAG Sec. 5.3): non-search steps only — 1 + 0.4·1/2 and 1 + 0.4·2/2; the search-only
    # rollout gets the batch's average bonus, (0.2 + 0.4) / 2
    assert totals == pytest.approx([1.3, 1.2, 1.4])
    assert all(s.error is None for s in ledger.latest)


def test_group_metrics_count_spread_and_groups_the_process_term_reorders() -> None:
    from trainer.rewards import group_metrics

    ledger = ScoreLedger()
    reward = MethodReward("hiprag", ledger=ledger)
    texts = [HIPRAG_SEARCH_ONLY] * 6 + ["<answer>Rome</answer>"] * 2
    flags = [[False], [True], [False], [False], [True], [True], [], []]
    reward(
        ["Q?"] * 8,
        texts,
        golden_answers=[["Paris"]] * 8,
        judgements=[{"step_flags": f} for f in flags],
    )
    # groups of 2: {1.4, 1.0} the bonus breaks an outcome tie; {1.4, 1.4} no spread; {1.0, 1.0} no spread
    # (the same flag); {0, 0} (invalid, wrong) no spread
    metrics = group_metrics("hiprag", ledger.latest, 2)
    assert metrics == {"groups/spread_rate": 0.25, "groups/process_reordered_rate": 0.25}
    # groups of 4: {1.4, 1.0, 1.4, 1.4} tie broken; {1.0, 1.0, 0, 0} spread by the outcome alone, order kept
    assert group_metrics("hiprag", ledger.latest, 4) == {
        "groups/spread_rate": 1.0,
        "groups/process_reordered_rate": 0.5,
    }
    assert "groups/process_reordered_rate" not in group_metrics("autosearch", ledger.latest, 4)


def test_the_evidence_judges_rules_reach_the_metrics_and_the_samples() -> None:
    from trainer.callbacks import sample_row, score_metrics

    ledger = ScoreLedger()
    MethodReward("hiprag", ledger=ledger)(
        ["Q?"] * 2,
        [HIPRAG_NON_SEARCH, HIPRAG_SEARCH_ONLY],
        golden_answers=[["Paris"]] * 2,
        judgements=[
            {"step_flags": [True, False, False], "step_rules": ["no_new_support", None, None]},
            {"step_flags": [True], "step_rules": ["repeated_query"]},
        ],
    )
    assert [s.over_search_rules for s in ledger.latest] == [("no_new_support",), ("repeated_query",)]
    metrics = score_metrics(ledger.latest)
    assert (metrics["osr"], metrics["osr_redundant"]) == (1.0, 0.5)
    first = sample_row(1, ledger.latest[0])["steps"][0]["verdicts"][0]
    assert first == {"detector": "over_search", "outcome": "true", "rule": "no_new_support"}
