"""score_batch (HiPRAG Sec. 5.3's batch-average bonus) and score()'s typed errors: never a bare ValueError."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scoring.errors import BatchAverageRequired
from scoring.scorer import METHODS, BatchItem, Scored, ScoringInputError, score, score_batch
from scoring.verdicts import MissingVerdict

SEARCH = (
    "<step>\n<reasoning>look it up</reasoning>\n<search>capital of France</search>\n"
    "<context>Doc 1(Title: France) Paris is the capital</context>\n<conclusion>Paris</conclusion>\n</step>\n"
)
NON_SEARCH = "<step>\n<reasoning>I know it</reasoning>\n<conclusion>Paris</conclusion>\n</step>\n"


def hiprag(*steps: str, answer: str = "Paris") -> str:
    return f"<think>\n{''.join(steps)}</think>\n<answer>{answer}</answer>"


ONLY_SEARCH = hiprag(SEARCH)  # no non-search step: nothing for under_only to count
MIXED = hiprag(SEARCH, NON_SEARCH, NON_SEARCH)
GOLD = ["Paris"]


def test_under_only_lacking_its_step_type_is_a_typed_error_alone_and_the_batch_average_in_a_batch() -> None:
    with pytest.raises(BatchAverageRequired) as raised:
        score(
            "hiprag", ONLY_SEARCH, GOLD, params={"process": "under_only"}, judgements={"step_flags": [False]}
        )
    assert type(raised.value) is not ValueError
    assert raised.value.field == "params.batch_average_bonus"
    results = score_batch(
        "hiprag",
        [
            BatchItem(MIXED, GOLD, {"step_flags": [True, False, True]}),  # 1 of 2 non-search steps optimal
            BatchItem(ONLY_SEARCH, GOLD, {"step_flags": [True]}),
            BatchItem(hiprag(SEARCH, NON_SEARCH), GOLD, {"step_flags": [False, False]}),  # 1 of 1
        ],
        params={"process": "under_only"},
    )
    assert all(isinstance(r, Scored) for r in results)
    totals = [r.reward.total for r in results if isinstance(r, Scored)]
    # Eq. 1 with N, N_corr over non-search steps only: 1 + 0.4·1/2 and 1 + 0.4·1/1; Sec. 5.3: the search-only
    # trajectory gets the mean of the two earned bonuses, (0.2 + 0.4) / 2 = 0.3
    assert totals == pytest.approx([1.2, 1.3, 1.4])


def test_the_batch_average_leaves_out_failed_and_borrowed_bonuses_and_is_0_without_earners() -> None:
    results = score_batch(
        "hiprag",
        [
            BatchItem(MIXED, GOLD, {"step_flags": [False, "error", False]}),  # a needed verdict failed
            BatchItem(ONLY_SEARCH, GOLD, {"step_flags": [False]}),
        ],
        params={"process": "under_only", "lambda_p": 0.4},
    )
    assert isinstance(results[0], MissingVerdict)
    assert isinstance(results[1], Scored) and results[1].reward.total == pytest.approx(1.0)


def test_an_explicit_batch_average_is_used_as_given() -> None:
    (result,) = score_batch(
        "hiprag",
        [BatchItem(ONLY_SEARCH, GOLD, {})],
        params={"process": "under_only", "batch_average_bonus": 0.25},
    )
    assert isinstance(result, Scored) and result.reward.total == pytest.approx(1.25)


@pytest.mark.parametrize(
    ("text", "flags", "field", "message"),
    [
        (hiprag(SEARCH), [False, False], "judgements.step_flags", "2 verdicts for 1 steps"),
        ("not a trajectory", [True], "judgements.step_flags", "1 verdicts for 0 steps"),
    ],
)
def test_a_verdict_count_that_does_not_match_the_steps_names_its_field(
    text: str, flags: list[Any], field: str, message: str
) -> None:
    with pytest.raises(ScoringInputError) as raised:
        score("hiprag", text, GOLD, judgements={"step_flags": flags})
    assert (raised.value.field, raised.value.message) == (field, message)
    assert str(raised.value) == f"{field}: {message}"


def test_search_r1_weights_whose_sum_exceeds_one_name_the_field() -> None:
    with pytest.raises(ScoringInputError) as raised:
        score(
            "search_r1",
            "<answer>x</answer>",
            GOLD,
            params={"structure_format_score": 0.8, "retrieval_score": 0.5},
        )
    assert raised.value.field == "params.retrieval_score"


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=8,
)
PARAM_KEYS = sorted({key for spec in METHODS.values() for key in spec.params})
JUDGEMENT_KEYS = sorted({key for spec in METHODS.values() for key in spec.judgements})
TEXTS = st.sampled_from([ONLY_SEARCH, MIXED, hiprag(NON_SEARCH), "", "<answer>Paris</answer>"]) | st.text(
    max_size=40
)
FLAGS = st.lists(st.sampled_from([True, False, "true", "false", "error", "unparseable", None, 3]), max_size=5)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    method=st.sampled_from([*METHODS, "nope"]) | st.none(),
    text=TEXTS | JSON,
    golds=st.lists(st.text(max_size=6), max_size=3) | JSON,
    params=st.dictionaries(st.sampled_from([*PARAM_KEYS, "bogus"]), JSON | st.floats(0, 1), max_size=4)
    | JSON,
    judgements=st.fixed_dictionaries({}, optional={"step_flags": FLAGS | JSON})
    | st.dictionaries(st.sampled_from([*JUDGEMENT_KEYS, "bogus"]), JSON, max_size=3)
    | JSON,
)
def test_score_never_raises_a_bare_value_error(
    method: Any, text: Any, golds: Any, params: Any, judgements: Any
) -> None:
    try:
        score(method, text, golds, params=params, judgements=judgements)
    except (ScoringInputError, MissingVerdict) as exc:
        assert type(exc) is not ValueError
        assert not isinstance(exc, ScoringInputError) or exc.field
    try:
        score_batch(method, [BatchItem(text, golds, judgements)] * 2, params=params)
    except ScoringInputError as exc:
        assert exc.field == "method"


def _outcome(result: Scored | Exception) -> tuple[Any, ...]:
    if isinstance(result, Scored):
        return ("scored", result.reward.total, tuple(sorted(result.reward.components.items())))
    return (type(result).__name__, str(result))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    method=st.sampled_from(list(METHODS)),
    texts=st.lists(TEXTS | st.integers(), min_size=1, max_size=3),
    golds=st.sampled_from([GOLD, [], "Paris", [3]]),
    params=st.dictionaries(st.sampled_from([*PARAM_KEYS, "bogus"]), st.floats(0, 1), max_size=2) | JSON,
    flags=FLAGS,
)
def test_a_batch_reading_its_weights_once_gives_each_item_what_score_gives_it(
    method: str, texts: list[Any], golds: Any, params: Any, flags: list[Any]
) -> None:
    judgements = {"step_flags": flags} if method == "hiprag" else None
    items = [BatchItem(text, golds, judgements) for text in texts]
    for item, result in zip(items, score_batch(method, items, params=params), strict=True):
        try:
            alone: Scored | Exception = score(
                method, item.text, item.golds, params=params, judgements=item.judgements
            )
        except (ScoringInputError, MissingVerdict) as exc:
            alone = exc
        if not isinstance(
            alone, BatchAverageRequired
        ):  # the batch fills in its average where score() refuses
            assert _outcome(result) == _outcome(alone)
