"""Experiments with several seed pairs (issue 35): the stages per pair, each train run with its pair's seed, the
result's per-pair and pooled arm − baseline differences, the page, the form and the command, and the migration that
gives stored links their seed."""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command

from scoring.seed_bootstrap import SeedPair, seed_bootstrap
from tests.agent.test_rollout import response
from webapp.evaluation.compare import question_ratios
from webapp.experiments import services
from webapp.experiments.models import Experiment, ExperimentRun
from webapp.experiments.reporting import result_text
from webapp.experiments.seed_pairs import POOLED_METRICS
from webapp.experiments.specs import ExperimentConfigError, ExperimentSpec, parse_arm
from webapp.runs.models import Run

pytestmark = pytest.mark.django_db

ARMS = (parse_arm("outcome=search_r1:reward=outcome"), parse_arm("process=search_r1:reward=format"))
QUESTION_NUMBER = re.compile(r"France \((\d+)\)")


def answering(searches: Callable[[int], int], answer: Callable[[int], str]) -> Callable[[str], str]:
    """A Search-R1-format policy: question i searched ``searches(i)`` times, then answered ``answer(i)``."""

    def script(text: str) -> str:
        found = QUESTION_NUMBER.search(text)
        i = int(found.group(1)) if found else 0
        if response(text).count("<information>") < searches(i):
            return "<think> I need the capital. </think>\n<search> capital of France </search>"
        return f"<think> It is {answer(i)}. </think>\n<answer> {answer(i)} </answer>"

    return script


def trained_policy(arm: str, seed: int) -> Callable[[str], str]:
    """What each arm's model "learned" with each seed: the outcome arm searches twice and misses one question; the
    process arm searches once on most questions (which ones depends on the seed), and misses another one with seeds
    after the first: differences of #Search, OSR and CEM that vary from pair to pair."""
    if arm == "outcome":
        return answering(lambda i: 2, lambda i: "Berlin" if i == 4 + seed % 4 else "Paris")
    return answering(
        lambda i: 2 if (i + seed) % 3 == 0 else 1,
        lambda i: "Berlin" if i == 4 + seed % 4 or (seed and i == 4 + (seed + 1) % 4) else "Paris",
    )


@pytest.fixture
def seeded_models(monkeypatch: pytest.MonkeyPatch, fake_stages: dict[str, Any]) -> None:
    """Each evaluated model answers as its arm and seed would have it (the start model: one search)."""
    from tests.webapp.experiments.fake_runner import scripted_evaluation
    from trainer.jobs import evaluation

    def policy_for(stage: Any) -> Callable[[str], str]:
        if stage.role != "eval":
            return answering(lambda i: 1, lambda i: "Paris")
        return trained_policy(stage.arm, int(stage.pair_seed))

    monkeypatch.setattr(evaluation, "evaluate_model", scripted_evaluation(policy_for))


def test_the_stages_run_per_seed_pair_after_the_shared_ones(make_spec: Any) -> None:
    spec = make_spec(arms=ARMS, baseline="outcome", seeds=2, screen_samples=1, screen_max_passes=1, seed=3)

    stages = services.experiment_stages(spec)

    assert [(s.role, s.arm, s.seed) for s in stages] == [
        ("screen", "sample-1", 3),
        ("start_eval", "", 3),
        ("train", "outcome", 3),
        ("eval", "outcome", 3),
        ("train", "process", 3),
        ("eval", "process", 3),
        ("train", "outcome", 4),
        ("eval", "outcome", 4),
        ("train", "process", 4),
        ("eval", "process", 4),
    ]
    assert stages[-1].label == "eval process · seed 4" and stages[1].label == "start_eval search_r1"
    one = services.experiment_stages(make_spec(arms=ARMS, baseline="outcome"))
    assert [s.label for s in one][-1] == "eval process" and {s.seed for s in one} == {0}


@pytest.mark.slow
def test_three_seed_pairs_give_per_pair_and_pooled_differences(
    make_spec: Any, seeded_models: None, researcher_client: Any
) -> None:
    spec = make_spec(arms=ARMS, baseline="outcome", seeds=3)
    experiment = services.experiment_create(user=None, spec=spec, enqueue=False)
    assert experiment.name.endswith("seeds 0–2")

    experiment = services.experiment_execute(experiment_id=experiment.pk)

    assert experiment.status == Experiment.Status.FINISHED, experiment.error
    links = {(link.role, link.arm, link.seed): link.run for link in experiment.links.select_related("run")}
    assert len(links) == 1 + 3 * 2 * 2
    for seed in (
        0,
        1,
        2,
    ):  # each pair trained with its seed; the process arm compared with its pair's baseline
        for arm in ("outcome", "process"):
            train = links[("train", arm, seed)]
            assert train.config["training"]["seed"] == seed and train.name.endswith(f"{arm} · seed {seed}")
            assert links[("eval", arm, seed)].model_name == train.config["output_dir"]
        assert links[("eval", "process", seed)].base_run_id == links[("eval", "outcome", seed)].pk
        assert links[("eval", "outcome", seed)].base_run_id == links[("start_eval", "", 0)].pk

    result = experiment.result
    assert result["seeds"] == [0, 1, 2] and result["pooled_metrics"] == list(POOLED_METRICS)
    assert [row["label"] for row in result["rows"]][:3] == [
        "start · search_r1",
        "trained · outcome · seed 0",
        "trained · process · seed 0",
    ]
    assert "process − outcome (trained) · seed 2" in [d["label"] for d in result["differences"]]
    # The pooled figures are scoring.seed_bootstrap's on the evaluations' per-question contributions.
    expected = seed_bootstrap(
        [
            SeedPair(
                f"seed {s}",
                question_ratios(run_id=links[("eval", "outcome", s)].pk),
                question_ratios(run_id=links[("eval", "process", s)].pk),
            )
            for s in (0, 1, 2)
        ],
        POOLED_METRICS,
        n_resamples=spec.resamples,
        seed=spec.seed,
    )
    [pooled] = result["pooled"]
    assert pooled["label"] == "process − outcome" and pooled["n_pairs"] == 3 and pooled["n_questions"] == 4
    for got in pooled["metrics"]:
        want = expected.pooled[got["metric"]]
        assert (got["difference"], got["low"], got["high"], got["same_sign"]) == (
            want.difference,
            want.low,
            want.high,
            want.same_sign,
        )
    searches = pooled["metrics"][0]
    assert searches["metric"] == "average_searches" and searches["difference"] < 0 and searches["same_sign"]
    assert [(p["seed"], p["run_id"]) for p in result["pairs"]] == [
        (s, links[("eval", "process", s)].pk) for s in (0, 1, 2)
    ]
    for pair, (_, table) in zip(result["pairs"], expected.pairs, strict=True):
        assert [(m["difference"], m["low"], m["high"]) for m in pair["metrics"]] == [
            (table[m].difference, table[m].low, table[m].high) for m in POOLED_METRICS
        ]
    cem = [m["difference"] for p in result["pairs"] for m in p["metrics"] if m["metric"] == "cem"]
    assert cem == [0.0, -0.25, -0.25]  # the pairs differ: seed 0's process arm misses no extra question

    text = result_text(result)
    assert "Seed pairs: arm − baseline per pair" in text and "pooled (3 pairs)" in text
    assert "same sign in every pair" in text

    html = researcher_client.get(f"/experiments/{experiment.pk}/").content.decode()
    assert 'id="seed-pairs-process"' in html and "process − outcome per seed pair, and pooled" in html
    assert html.count('<tr class="seed-pair">') == 3 and "pooled (3 pairs)" in html
    assert "same sign in every pair" in html and "two-level bootstrap" in html
    assert (
        f"<strong>{searches['difference']:+.2f} [{searches['low']:+.2f}, {searches['high']:+.2f}]</strong>"
        in html
    )
    assert "3 seed pairs</strong> (seeds 0, 1, 2)" in html and 'id="every-comparison"' in html


def test_one_seed_keeps_the_result_as_it_was(make_spec: Any) -> None:
    experiment = services.experiment_create(user=None, spec=make_spec(), enqueue=False)
    experiment = services.experiment_execute(experiment_id=experiment.pk)

    assert experiment.status == Experiment.Status.FINISHED, experiment.error
    assert not {"pairs", "pooled", "seeds"} & set(experiment.result)
    assert all("seed" not in row for row in experiment.result["rows"])
    assert set(experiment.links.values_list("seed", flat=True)) == {0}


def test_seeds_are_declared_once_and_checked(make_spec: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from webapp.experiments.forms import ExperimentForm

    field = ExperimentForm().fields["seeds"]
    assert (field.min_value, field.max_value, field.initial) == (1, 10, 1) and "two-level" in field.help_text
    with pytest.raises(SystemExit):
        call_command("experiment", "--help")
    assert "--seeds S" in capsys.readouterr().out
    for bad in (0, 11):
        with pytest.raises(ExperimentConfigError, match="1 to 10 seed pairs") as caught:
            services.experiment_create(user=None, spec=make_spec(seeds=bad), enqueue=False)
        assert caught.value.field == "seeds"
    assert ExperimentSpec.from_json({**make_spec().to_json(), "seeds": 3}).seed_list == (0, 1, 2)
    stored = make_spec().to_json()
    stored.pop("seeds")
    assert ExperimentSpec.from_json(stored).seeds == 1  # stored before seeds: one pair


def test_the_command_takes_seeds(make_spec: Any, question_file: Any, index: Any, start_model: Any) -> None:
    call_command(
        "experiment",
        "--arm",
        "outcome=search_r1:reward=outcome",
        "--arm",
        "process=search_r1:reward=format",
        "--baseline",
        "outcome",
        "--seeds",
        "2",
        "--model",
        str(start_model),
        "--train-questions",
        str(question_file),
        "--train-split",
        "train",
        "--eval-questions",
        str(question_file),
        "--eval-split",
        "test",
        "--index-id",
        str(index.pk),
        "--steps",
        "1",
        "--num-generations",
        "2",
        "--batch-size",
        "2",
        "--resamples",
        "50",
        stdout=StringIO(),
        stderr=StringIO(),
    )
    experiment = Experiment.objects.get()
    assert experiment.status == Experiment.Status.FINISHED and experiment.spec["seeds"] == 2
    assert sorted(experiment.links.filter(role="train").values_list("arm", "seed")) == [
        ("outcome", 0),
        ("outcome", 1),
        ("process", 0),
        ("process", 1),
    ]
    assert [p["n_pairs"] for p in experiment.result["pooled"]] == [2]


def test_the_migration_gives_stored_links_their_specs_seed(make_spec: Any) -> None:
    """experiments/0004_seed: an experiment stored before seeds (one pair, its training.seed) loads and resumes."""
    from django.apps import apps

    migration = importlib.import_module("webapp.experiments.migrations.0004_seed")
    spec = make_spec(seed=5).to_json()
    spec.pop("seeds")
    old = Experiment.objects.create(name="old", spec=spec)
    flat = Experiment.objects.create(name="flat", spec={"methods": ["hiprag"], "seed": 7, "steps": 2})
    run = Run.objects.create(name="r", kind="eval", method="search_r1")
    for experiment in (old, flat):
        ExperimentRun.objects.create(
            experiment=experiment, role="eval", method="search_r1", arm="search_r1", position=3, run=run
        )
        ExperimentRun.objects.create(
            experiment=experiment, role="start_eval", method="search_r1", position=0, run=run
        )

    migration.seed_links(apps, None)

    assert set(old.links.values_list("seed", flat=True)) == {5}
    assert set(flat.links.values_list("seed", flat=True)) == {7}
    loaded = ExperimentSpec.from_json(old.spec)
    assert loaded.seeds == 1 and loaded.seed_list == (5,)
    # The stages it would execute find the stored links (reused on resume).
    found = [services.stage_link(old, stage) for stage in services.experiment_stages(loaded)]
    assert [link.run_id if link else None for link in found] == [run.pk, None, None, run.pk, None, None]


@pytest.mark.slow  # two seed pairs through the runner, twice
def test_a_resumed_experiment_reruns_only_the_unfinished_stage_of_its_seed_pair(make_spec: Any) -> None:
    spec = make_spec(arms=ARMS, baseline="outcome", seeds=2)
    experiment = services.experiment_execute(
        experiment_id=services.experiment_create(user=None, spec=spec, enqueue=False).pk
    )
    assert experiment.status == Experiment.Status.FINISHED, experiment.error
    stopped = experiment.links.get(role="eval", arm="process", seed=1)
    Run.objects.filter(pk=stopped.run_id).update(status=Run.Status.FAILED)
    Experiment.objects.filter(pk=experiment.pk).update(status=Experiment.Status.FAILED)

    experiment = services.experiment_execute(experiment_id=experiment.pk)

    assert experiment.status == Experiment.Status.FINISHED, experiment.error
    attempts = {(link.role, link.arm, link.seed): link.attempts for link in experiment.links.all()}
    assert attempts.pop(("eval", "process", 1)) == 2 and set(attempts.values()) == {1}
    assert experiment.links.get(role="eval", arm="process", seed=1).run_id != stopped.run_id
    assert experiment.result["pooled"][0]["n_pairs"] == 2


def test_the_form_takes_seed_pairs(
    researcher_client: Any,
    make_spec: Any,
    index: Any,
    start_model: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    from unittest import mock

    spec = make_spec()
    data = {
        "arms": "outcome=search_r1:reward=outcome\nprocess=search_r1:reward=format",
        "baseline": "outcome",
        "seeds": 3,
        "model_path": str(start_model),
        "train_dataset": spec.train_dataset_id,
        "train_split": "",
        "train_limit": 2,
        "eval_dataset": spec.eval_dataset_id,
        "eval_split": "",
        "eval_limit": 3,
        "index": index.pk,
        "judge": "evidence",
        "steps": 1,
        "algorithm": "grpo",
        "num_generations": 2,
        "batch_size": 2,
        "eval_batch_size": 8,
        "resamples": 100,
    }
    with (
        mock.patch("webapp.experiments.tasks.experiment_run_task.delay"),
        django_capture_on_commit_callbacks(execute=True),
    ):
        response = researcher_client.post("/experiments/", data)
    assert response.status_code == 302, response.context["form"].errors
    assert Experiment.objects.get().spec["seeds"] == 3

    response = researcher_client.post("/experiments/", {**data, "seeds": 11})
    assert response.status_code == 400 and response.context["form"].errors["seeds"]
