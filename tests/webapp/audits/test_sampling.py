from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from tests.webapp.factories import DatasetFactory, RunFactory, StepFactory, TrajectoryFactory, UserFactory
from webapp.audits.models import AuditItem
from webapp.audits.sampling import SampleTooLarge, proportional_allocation, round_robin, sample_ids
from webapp.audits.services import audit_create

pytestmark = pytest.mark.django_db


def trajectories_with_a_step(n, **fields):
    trajectories = TrajectoryFactory.create_batch(n, **fields)
    for trajectory in trajectories:
        StepFactory(trajectory=trajectory, index=0)
    return trajectories


def sampled(audit):
    return list(audit.items.order_by("position").values_list("trajectory_id", flat=True))


@pytest.mark.parametrize(
    ("sizes", "n", "quotas"),
    [
        ({"a": 7, "b": 5}, 8, {"a": 5, "b": 3}),  # 4.67 / 3.33: the larger remainder gets the extra one
        ({"a": 6, "b": 3}, 6, {"a": 4, "b": 2}),  # exact
        ({"a": 1, "b": 1}, 1, {"a": 1, "b": 0}),  # a tie goes to the stratum that sorts first
        ({None: 2, 1: 2}, 4, {None: 2, 1: 2}),  # the whole population: every quota is its stratum's size
    ],
)
def test_it_allocates_a_stratified_sample_in_proportion(sizes, n, quotas):
    assert proportional_allocation(sizes, n) == quotas


def test_it_draws_the_same_ids_whatever_the_candidates_order():
    candidates = [(i, i % 3) for i in range(30)]
    first = sample_ids(candidates, 10, seed=5, stratified=True)
    assert first == sample_ids(list(reversed(candidates)), 10, seed=5, stratified=True)
    assert len(set(first)) == 10
    with pytest.raises(SampleTooLarge):
        sample_ids(candidates, 31, seed=5, stratified=False)


def test_it_assigns_annotators_round_robin():
    assert round_robin(["a", "b", "c"], 4, 2) == [["a", "b"], ["c", "a"], ["b", "c"], ["a", "b"]]
    with pytest.raises(ValueError, match="only 1 annotators"):
        round_robin(["a"], 1, 2)


def test_it_samples_deterministically_from_the_seed():
    run = RunFactory()
    trajectories_with_a_step(12, run=run)
    first = audit_create(name="a", run_ids=[run.pk], sample_size=5, seed=7)
    again = audit_create(name="b", run_ids=[run.pk], sample_size=5, seed=7)
    other = audit_create(name="c", run_ids=[run.pk], sample_size=5, seed=8)
    assert sampled(first) == sampled(again)
    assert sampled(first) != sampled(other)


def test_it_stratifies_by_dataset_in_proportion():
    run = RunFactory()
    big, small = DatasetFactory(), DatasetFactory()
    trajectories_with_a_step(6, run=run, dataset=big, question__dataset=big)
    trajectories_with_a_step(3, run=run, dataset=small, question__dataset=small)
    audit = audit_create(name="a", run_ids=[run.pk], sample_size=6, seed=1, stratification="dataset")
    datasets = list(AuditItem.objects.filter(audit=audit).values_list("trajectory__dataset", flat=True))
    assert sorted(datasets) == sorted([big.pk] * 4 + [small.pk] * 2)
    assert audit.stratification == "dataset"


def test_it_stratifies_by_correctness():
    run = RunFactory()
    trajectories_with_a_step(8, run=run, exact_match=True)
    trajectories_with_a_step(2, run=run, exact_match=False)
    audit = audit_create(name="a", run_ids=[run.pk], sample_size=5, seed=3, stratification="correctness")
    correct = list(audit.items.values_list("trajectory__exact_match", flat=True))
    assert sorted(correct) == [False, True, True, True, True]


def test_it_says_clearly_when_the_runs_hold_too_few_trajectories():
    run = RunFactory()
    trajectories_with_a_step(3, run=run)
    TrajectoryFactory(run=run)  # no steps: nothing to label, so not a candidate
    with pytest.raises(ValidationError) as error:
        audit_create(name="a", run_ids=[run.pk], sample_size=200, seed=0)
    assert error.value.message_dict["sample_size"] == [
        "The chosen runs hold only 3 trajectories with steps to label, fewer than the sample of 200: lower "
        "the sample size or add runs."
    ]


def test_it_gives_each_item_its_number_of_annotators():
    run = RunFactory()
    trajectories_with_a_step(6, run=run)
    people = UserFactory.create_batch(3)
    audit = audit_create(
        name="a", run_ids=[run.pk], sample_size=6, seed=0, annotators=people, annotators_per_item=2
    )
    for item in audit.items.all():
        assert item.assignees.count() == 2
    loads = [person.assigned_audit_items.filter(audit=audit).count() for person in people]
    assert loads == [4, 4, 4]  # 6 items × 2 labels shared evenly by 3 people
    with pytest.raises(ValidationError, match="only 3 annotators"):
        audit_create(name="b", run_ids=[run.pk], sample_size=2, annotators=people, annotators_per_item=4)
