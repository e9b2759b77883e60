"""evaluation_run_create and evaluation_run_execute end to end, with a scripted policy and a local judge server."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from tests.agent.conftest import ScriptedServer
from tests.webapp.evaluation.conftest import POLICIES, judge_responder, spec_for
from webapp.evaluation.models import EvaluationReport, EvaluationStats, ReferencePlan
from webapp.evaluation.services import evaluation_run_create, evaluation_run_execute
from webapp.evaluation.specs import EvaluationConfigError
from webapp.runs.models import Run
from webapp.trajectories.models import JudgeCallCache, JudgeVerdict, Step, Trajectory

pytestmark = pytest.mark.django_db


def test_it_enqueues_the_run_on_commit(
    tmp_path: Path, datasets: Any, researcher: Any, django_capture_on_commit_callbacks: Any
) -> None:
    nq, _ = datasets
    with (
        mock.patch("webapp.evaluation.tasks.evaluation_run_task.delay") as delay,
        django_capture_on_commit_callbacks(execute=True),
    ):
        run = evaluation_run_create(user=researcher, spec=spec_for(tmp_path, (nq.pk,), "http://judge/v1"))
    delay.assert_called_once_with(run.pk)
    assert (run.kind, run.status, run.dataset_id) == ("eval", "pending", nq.pk)
    assert run.config["dataset_ids"] == [nq.pk] and run.judge_settings["model"] == "judge-m"


def test_it_refuses_a_run_without_retrieval(tmp_path: Path, datasets: Any) -> None:
    spec = spec_for(tmp_path, (datasets[0].pk,), "http://judge/v1")
    spec = type(spec)(**{**spec.to_json(), "retrieve_url": "", "judge": spec.judge})
    with pytest.raises(EvaluationConfigError, match="index"):
        evaluation_run_create(user=None, spec=spec)


def test_it_stores_trajectories_verdicts_and_the_report(
    tmp_path: Path, datasets: Any, judge_server: ScriptedServer, fake_components: Any
) -> None:
    nq, hotpot = datasets
    spec = spec_for(tmp_path, (nq.pk, hotpot.pk), judge_server.base_url, batch_size=1)
    run = evaluation_run_create(user=None, spec=spec, enqueue=False)

    run = evaluation_run_execute(run_id=run.pk)

    assert run.status == Run.Status.FINISHED, run.error
    trajectories = Trajectory.objects.filter(run=run)
    assert trajectories.count() == 3 and all(t.exact_match and t.n_searches == 1 for t in trajectories)
    search = Step.objects.get(trajectory=trajectories[0], index=0)
    assert search.kind == "search" and search.regenerated_answer == "Paris is the capital of France."
    over = JudgeVerdict.objects.get(trajectory=trajectories[0], detector="over_search")
    assert (over.outcome, over.step_id, over.judge_model) == ("true", search.pk, "judge-m")
    under = JudgeVerdict.objects.get(trajectory=trajectories[0], detector="under_search")
    assert under.outcome == "error" and "HTTP 400" in under.raw_reply  # a failed call is an error, not a "no"
    assert under.step.index == 1
    assert all(t.total_reward is None for t in trajectories)  # HiPRAG's reward needs the missing verdict

    rows = {r.dataset: r.row for r in EvaluationReport.objects.filter(run=run)}
    assert list(EvaluationReport.objects.filter(run=run).values_list("dataset", flat=True)) == [
        "hotpotqa",
        "nq",
        "average",
        "overall",
    ]
    assert rows["nq"]["n_trajectories"] == 2 and rows["nq"]["cem"] == 1.0 and rows["nq"]["osr"] == 1.0
    assert rows["overall"]["usr"] is None and rows["overall"]["n_judge_errors"] == 3
    stats = EvaluationStats.objects.get(run=run)
    assert stats.n_trajectories == 3 and stats.n_judge_errors == 3 and stats.n_reward_errors == 3
    assert stats.judge_stats["judge-m"]["errors"] == 3
    assert stats.generation_tokens["completion"] > 0
    assert "hotpotqa: 1/1 questions" in Run.objects.get(pk=run.pk).log_tail


def test_it_answers_a_repeated_judge_call_from_the_database_cache(
    tmp_path: Path, datasets: Any, judge_server: ScriptedServer, fake_components: Any
) -> None:
    nq, _ = datasets
    spec = spec_for(tmp_path, (nq.pk,), judge_server.base_url, limit=1)
    evaluation_run_execute(run_id=evaluation_run_create(user=None, spec=spec, enqueue=False).pk)
    assert JudgeCallCache.objects.filter(judge_model="judge-m").count() == 1  # errors are never cached
    asked = len(judge_server.requests)

    second = evaluation_run_execute(run_id=evaluation_run_create(user=None, spec=spec, enqueue=False).pk)

    assert len(judge_server.requests) == asked + 1  # only the failing under-search call went out again
    assert second.evaluation_stats.judge_stats["judge-m"]["cache_hits"] == 1
    assert JudgeCallCache.objects.get().hits == 1


def test_it_stores_search_p1_reference_plans_once_per_question(
    tmp_path: Path, datasets: Any, judge_server: ScriptedServer, fake_components: Any
) -> None:
    judge_server.responder = judge_responder
    fake_components(POLICIES["search_p1"])
    nq, _ = datasets
    spec = spec_for(tmp_path, (nq.pk,), judge_server.base_url, method="search_p1")
    run = evaluation_run_execute(run_id=evaluation_run_create(user=None, spec=spec, enqueue=False).pk)

    assert run.status == Run.Status.FINISHED, run.error
    assert ReferencePlan.objects.filter(planner_model="judge-m").count() == 2
    path = JudgeVerdict.objects.filter(trajectory__run=run, detector="path").first()
    assert path is not None and path.outcome == "true" and path.score == 1.0
    assert all(t.total_reward is not None for t in Trajectory.objects.filter(run=run))


def test_it_marks_the_run_failed_with_the_error(
    tmp_path: Path, datasets: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_model(spec: Any) -> Any:
        raise OSError("no model files in the folder")

    monkeypatch.setattr("webapp.evaluation.components.build_backend", no_model)
    spec = spec_for(tmp_path, (datasets[0].pk,), "http://judge/v1")
    run = evaluation_run_execute(run_id=evaluation_run_create(user=None, spec=spec, enqueue=False).pk)
    assert run.status == Run.Status.FAILED and run.error == "OSError: no model files in the folder"


def test_the_engine_is_closed_when_the_run_ends_or_fails(
    tmp_path: Path, datasets: Any, judge_server: ScriptedServer, fake_components: Any
) -> None:
    backend = fake_components(POLICIES["hiprag"])
    backend.close = mock.Mock()  # a vLLM engine's worker process must not outlive its run
    spec = spec_for(tmp_path, (datasets[0].pk,), judge_server.base_url, limit=1)
    run = evaluation_run_execute(run_id=evaluation_run_create(user=None, spec=spec, enqueue=False).pk)
    assert run.status == Run.Status.FINISHED, run.error
    backend.close.assert_called_once_with()

    failing = fake_components(POLICIES["hiprag"])
    failing.close = mock.Mock()
    failing.generate = mock.Mock(side_effect=RuntimeError("engine died"))
    run = evaluation_run_execute(run_id=evaluation_run_create(user=None, spec=spec, enqueue=False).pk)
    assert run.status == Run.Status.FAILED and "engine died" in run.error
    failing.close.assert_called_once_with()


def test_a_vllm_evaluation_needs_a_model_folder(tmp_path: Path, datasets: Any) -> None:
    spec = spec_for(tmp_path, (datasets[0].pk,), "http://judge/v1", backend="vllm")
    assert evaluation_run_create(user=None, spec=spec, enqueue=False).config["backend"] == "vllm"
    missing = spec_for(tmp_path / "nowhere", (datasets[0].pk,), "http://judge/v1", backend="vllm")
    with pytest.raises(EvaluationConfigError, match="not a model folder") as error:
        evaluation_run_create(user=None, spec=missing, enqueue=False)
    assert error.value.field == "model"
