"""An experiment without models or a trainer: scripted policies answer in each method's format, a keyword searcher
stands in for the index, and a fake supervisor "trains" by writing a model folder and two metric curves.

The real thing (the tiny model, a BM25 index, ``python -m trainer.train`` as a subprocess) runs in the slow test.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.agent.conftest import PASSAGES, KeywordSearcher, ScriptedBackend
from tests.agent.test_rollout import search_r1_policy
from tests.webapp.evaluation.conftest import hiprag_two_steps
from webapp.corpora.models import Corpus, Index
from webapp.evaluation import components
from webapp.experiments import inputs
from webapp.experiments.specs import KNOB_PATHS, ExperimentSpec, JudgeChoice
from webapp.runs.models import Run

QUESTIONS = [
    {
        "id": f"q{i}",
        "question": f"What is the capital of France ({i})?",
        "golden_answers": ["Paris"],
        "metadata": {"split": "train" if i < 4 else "test", "supporting_titles": ["Paris"]},
    }
    for i in range(8)
]


def any_method(text: str) -> str:
    """HiPRAG's two steps in HiPRAG's prompt, Search-R1's search-then-answer in the others."""
    return hiprag_two_steps(text) if "<reasoning>" in text else search_r1_policy(text)


@pytest.fixture
def question_file(tmp_path: Path) -> Path:
    path = tmp_path / "questions.jsonl"
    path.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    return path


@pytest.fixture
def index(db: Any, tmp_path: Path) -> Index:
    """An index row whose folder holds index metadata (the runner takes the folder as it is)."""
    (tmp_path / "metadata.json").write_text(json.dumps({"corpus_sha256": "c0ffee"}))
    corpus = Corpus.objects.create(name="keywords")
    return Index.objects.create(corpus=corpus, name="bm25", kind="bm25", path=str(tmp_path), status="ready")


@pytest.fixture
def start_model(tmp_path: Path) -> Path:
    folder = tmp_path / "start"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    return folder


@pytest.fixture
def fake_stages(monkeypatch: pytest.MonkeyPatch, settings: Any, tmp_path: Path) -> dict[str, Any]:
    """The stage runner in a thread with scripted models (tests/webapp/experiments/fake_runner.py), launched as the
    local placement, or through a fake Ray client (``state["ray"]``); the app's own evaluation components scripted
    too. ``state["interrupt"]`` names a method whose training is interrupted once, ``state["fail"]`` one whose
    trainer exits 1; ``state["trained"]`` lists the training stages launched."""
    from tests.webapp.experiments import fake_runner
    from trainer.jobs import evaluation, training
    from webapp.experiments import runner_placement
    from webapp.training import executors

    settings.TRAINING_RUNS_DIR = tmp_path / "runs"
    settings.EXPERIMENTS_DIR = tmp_path / "experiments"
    settings.EXPERIMENT_POLL_SECONDS = 0.05
    searcher = KeywordSearcher(PASSAGES)
    monkeypatch.setattr(components, "build_backend", lambda spec: ScriptedBackend(any_method))
    monkeypatch.setattr(components, "build_searcher", lambda spec: searcher)
    state: dict[str, Any] = {
        "interrupt": None,
        "fail": None,
        "trained": [],
        "ray": fake_runner.FakeJobClient(),
    }
    monkeypatch.setattr(
        evaluation, "evaluate_model", fake_runner.scripted_evaluation(lambda stage: any_method)
    )
    monkeypatch.setattr(training, "launch", fake_runner.fake_launch(state))
    monkeypatch.setattr(runner_placement, "LocalRunner", lambda launch: fake_runner.ThreadRunner(launch.argv))
    monkeypatch.setattr(executors, "job_client", lambda: state["ray"])
    return state


@pytest.fixture
def make_spec(
    question_file: Path, index: Index, start_model: Path, fake_stages: dict[str, Any]
) -> Callable[..., ExperimentSpec]:
    def make(**overrides: Any) -> ExperimentSpec:
        rows = inputs.read_question_file(question_file)
        values: dict[str, Any] = {
            "methods": ("search_r1", "hiprag"),
            "baseline": "search_r1",
            "model": str(start_model),
            "train_dataset_id": inputs.experiment_dataset(
                rows=inputs.select_rows(rows, split="train"), label="train"
            ).pk,
            "eval_dataset_id": inputs.experiment_dataset(
                rows=inputs.select_rows(rows, split="test"), label="eval"
            ).pk,
            "index_id": index.pk,
            "judge": JudgeChoice("evidence"),
            "resamples": 200,
            **overrides,
        }
        if "arms" in values:
            values.pop("methods")
        knobs = {"steps": 2, "num_generations": 2, "batch_size": 2}
        for name in list(values):
            if name in KNOB_PATHS:
                knobs[name] = values.pop(name)
        return ExperimentSpec.with_knobs(knobs, **values)

    return make


__all__ = ["QUESTIONS", "Run"]
