"""The experiments pages, and the compare page with more than two runs, paired differences and training curves."""

from __future__ import annotations

import json
from typing import Any
from unittest import mock

import pytest

from webapp.datasets.models import Dataset
from webapp.experiments import services
from webapp.experiments.models import Experiment

pytestmark = pytest.mark.django_db


def test_it_starts_an_experiment_from_the_browser(
    researcher_client: Any,
    make_spec: Any,
    index: Any,
    start_model: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    spec = make_spec()  # imports the question datasets
    train = Dataset.objects.get(pk=spec.train_dataset_id)
    page = researcher_client.get("/experiments/")
    assert page.status_code == 200 and "New experiment" in page.content.decode()
    assert 'href="/experiments/"' in page.content.decode()  # the nav link

    data = {
        "methods": ["search_r1", "hiprag"],
        "baseline": "search_r1",
        "model_path": str(start_model),
        "train_dataset": train.pk,
        "train_split": "",
        "train_limit": 2,
        "eval_dataset": spec.eval_dataset_id,
        "eval_split": "",
        "eval_limit": 3,
        "index": index.pk,
        "judge": "evidence",
        "steps": 1,
        "seed": 5,
        "algorithm": "grpo",
        "learning_rate": "1e-5",
        "num_generations": 2,
        "batch_size": 2,
        "trainable_layers": 0,
        "max_turns": 2,
        "max_turn_tokens": 32,
        "max_rollout_tokens": 128,
        "max_obs_tokens": 50,
        "topk": 2,
        "eval_batch_size": 8,
        "resamples": 100,
    }
    with (
        mock.patch("webapp.experiments.tasks.experiment_run_task.delay") as delay,
        django_capture_on_commit_callbacks(execute=True),
    ):
        response = researcher_client.post("/experiments/", data)
    assert response.status_code == 302, response.context["form"].errors
    experiment = Experiment.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/experiments/{experiment.pk}/"
    delay.assert_called_once_with(experiment.pk)
    assert experiment.spec["run"]["training"]["seed"] == 5 and experiment.created_by.username == "rey"
    assert experiment.spec["eval_engine"] == "transformers"  # the default when the form leaves it out
    assert Dataset.objects.get(pk=experiment.spec["train_dataset_id"]).question_count == 2

    response = researcher_client.post("/experiments/", {**data, "batch_size": 3})
    assert response.status_code == 400
    assert "multiple of" in str(response.context["form"].errors["batch_size"])

    arms = {"arms": "outcome=hiprag:lambda_p=0\nprocess=hiprag:lambda_p=0.4", "baseline": "outcome"}
    with (
        mock.patch("webapp.experiments.tasks.experiment_run_task.delay"),
        django_capture_on_commit_callbacks(execute=True),
    ):
        response = researcher_client.post(
            "/experiments/",
            {
                **data,
                **arms,
                "lr_scheduler_type": "linear",
                "rollout_engine": "vllm",
                "dynamic_sampling": "on",
                "dynamic_sampling_max_draws": 3,
                "train_drop_guessable": "on",
            },
        )
    experiment = Experiment.objects.latest("pk")
    assert response.status_code == 302, response.context["form"].errors
    assert [(a["name"], a["params"]) for a in experiment.spec["arms"]] == [
        ("outcome", {"lambda_p": 0}),
        ("process", {"lambda_p": 0.4}),
    ]
    assert experiment.spec["run"]["training"]["lr_scheduler_type"] == "linear"
    # none of these questions is guessable, so all stay, in a dataset whose name says they were screened for it
    train_set = Dataset.objects.get(pk=experiment.spec["train_dataset_id"])
    assert train_set.name.startswith("experiment-train-unguessable-2-") and train_set.question_count == 2
    assert experiment.spec["run"]["rollout"]["engine"] == "vllm"
    # DAPO's dynamic sampling, a knob like the others (issue 21)
    training = experiment.spec["run"]["training"]
    assert (training["dynamic_sampling"], training["dynamic_sampling_max_draws"]) == (True, 3)
    page = researcher_client.get(f"/experiments/{experiment.pk}/").content.decode()
    assert "process = hiprag (lambda_p=0.4)" in page
    response = researcher_client.post("/experiments/", {**data, **arms, "baseline": "search_r1"})
    assert "Name one of the arms: outcome, process." in str(response.context["form"].errors["baseline"])


def test_the_page_shows_the_table_the_differences_and_resumes(
    researcher_client: Any, make_spec: Any, django_capture_on_commit_callbacks: Any
) -> None:
    experiment = services.experiment_create(user=None, spec=make_spec(), enqueue=False)
    experiment = services.experiment_execute(experiment_id=experiment.pk)

    html = researcher_client.get(f"/experiments/{experiment.pk}/").content.decode()
    assert 'id="experiment-table"' in html and "trained · hiprag" in html
    assert "hiprag − search_r1 (trained)" in html and "4 paired questions" in html
    assert "evidence — heuristic" in html and "/compare/?a=" in html

    Experiment.objects.filter(pk=experiment.pk).update(status="failed")
    with (
        mock.patch("webapp.experiments.tasks.experiment_run_task.delay") as delay,
        django_capture_on_commit_callbacks(execute=True),
    ):
        response = researcher_client.post(f"/experiments/{experiment.pk}/resume/")
    assert response.status_code == 302
    delay.assert_called_once_with(experiment.pk)
    assert Experiment.objects.get(pk=experiment.pk).status == "pending"
    assert researcher_client.get("/experiments/999999/").status_code == 404


def test_the_compare_page_takes_more_runs_with_their_differences_and_curves(
    researcher_client: Any, make_spec: Any
) -> None:
    from webapp.experiments.selectors import experiment_compare_query

    experiment = services.experiment_execute(
        experiment_id=services.experiment_create(user=None, spec=make_spec(), enqueue=False).pk
    )
    query = experiment_compare_query(experiment=experiment)
    links = {(link.role, link.method): link.run_id for link in experiment.links.all()}
    assert f"a={links[('eval', 'search_r1')]}" in query and f"b={links[('eval', 'hiprag')]}" in query

    response = researcher_client.get(f"/compare/?{query}")

    assert response.status_code == 200
    rows = response.context["many_runs"]
    assert [row["run"].pk for row in rows][:2] == [links[("eval", "search_r1")], links[("eval", "hiprag")]]
    assert len(rows) == 4 and rows[0]["differences"] is None
    assert rows[1]["n_pairs"] == 4 and rows[1]["differences"][0]["metric"] == "cem"
    html = response.content.decode()
    assert 'id="paired-differences"' in html and "ΔOSR" in html and "A vs this" in html
    curves = json.loads(
        html.split('<script id="compare-curves-data" type="application/json">')[1].split("</script>")[0]
    )
    assert {c["run"] for c in curves} == {links[("train", "search_r1")], links[("train", "hiprag")]}
    assert curves[0]["series"]["osr"] == [[1, 0.5], [2, 0.25]]
    assert "js/compare_curves.js" in html
    # The flip filter still works for any pair, the extra runs kept in its links.
    bucketed = researcher_client.get(f"/compare/?{query}&bucket=both_right")
    assert bucketed.status_code == 200 and "runs=" in bucketed.context["base_query"]
    assert (
        researcher_client.get(f"/compare/?{query.split('&runs=')[0]}&runs=1,x").context["form"].errors["runs"]
    )
