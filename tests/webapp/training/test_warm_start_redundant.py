"""The warm-start form's redundant-search share (issue 21): its budgets must have room for the extra search."""

from __future__ import annotations

from unittest import mock

import pytest

from webapp.runs.models import Run

pytestmark = pytest.mark.django_db


def test_the_warm_start_form_takes_a_redundant_search_share_only_with_room_for_it(
    researcher_client, django_capture_on_commit_callbacks, settings, tmp_path
):
    from tests.webapp.factories import CorpusFactory, DatasetFactory, QuestionFactory
    from webapp.corpora.models import Index

    settings.TRAINING_RUNS_DIR = tmp_path
    dataset = DatasetFactory(name="wiki")
    QuestionFactory(dataset=dataset, metadata={"split": "train", "supporting_titles": ["Paris"]})
    index = Index.objects.create(
        corpus=CorpusFactory(), name="bm25", kind="bm25", status=Index.Status.READY, path=str(tmp_path / "i")
    )
    post = {
        "name": "warm with redundant searches",
        "model_path": "tiny-random",
        "methods": ["hiprag", "search_r1"],
        "dataset": dataset.pk,
        "split": "train",
        "index": index.pk,
        "questions_per_method": 8,
        "no_search_share": 0.15,
        "redundant_search_share": 0.25,
        "epochs": 1,
        "learning_rate": "3e-4",
        "max_obs_tokens": 100,
        "max_turn_tokens": 64,
    }
    page = researcher_client.get("/training/warm-start/").content.decode()
    assert 'name="redundant_search_share"' in page and 'name="max_rollout_tokens"' in page

    no_turn = researcher_client.post("/training/warm-start/", {**post, "max_turns": 3})
    assert no_turn.status_code == 400 and "must be ≥ 4 with redundant searches" in no_turn.content.decode()
    no_room = researcher_client.post(
        "/training/warm-start/", {**post, "max_turns": 4, "max_rollout_tokens": 512}
    )
    assert no_room.status_code == 400 and "must be ≥ 764 with redundant searches" in no_room.content.decode()
    assert not Run.objects.exists()

    with (
        mock.patch("webapp.training.tasks.training_supervise_task.delay"),
        django_capture_on_commit_callbacks(execute=True),
    ):
        response = researcher_client.post(
            "/training/warm-start/", {**post, "max_turns": 4, "max_rollout_tokens": 768}
        )
    run = Run.objects.get()
    assert response.status_code == 302
    assert run.config["data"]["redundant_search_share"] == 0.25
    assert (run.config["max_turns"], run.config["max_rollout_tokens"]) == (4, 768)
