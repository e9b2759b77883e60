"""A real 1-step experiment: the tiny random model, a BM25 index, the stage runner (``python -m trainer.jobs
experiment``) as the worker's subprocess with its trainers and real evaluations, its spool replayed — then the stored
runs and the table."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.core.management import call_command

from retrieval.index import IndexConfig, build_index
from webapp.experiments.models import Experiment
from webapp.runs.models import MetricPoint, Run
from webapp.trajectories.models import Trajectory

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
N_PASSAGES = 200


@pytest.fixture
def shared_inputs(tmp_path: Path) -> tuple[Path, Path]:
    """The first passages of wiki_multihop's corpus (the demo's without the shared data) and a BM25 index of them;
    questions in the shared file's format, with metadata.split."""
    source = Path(django_settings.SHARED_DIR) / "data" / "wiki_multihop" / "corpus.jsonl"
    if not source.exists():
        source = Path(django_settings.BASE_DIR) / "demo" / "corpus.jsonl"
    corpus = tmp_path / "corpus.jsonl"
    with source.open(encoding="utf-8") as rows, corpus.open("w", encoding="utf-8") as out:
        for number, line in enumerate(rows):
            if number == N_PASSAGES:
                break
            out.write(line)
    build_index(corpus, tmp_path / "bm25", IndexConfig(kind="bm25"))
    questions = tmp_path / "questions.jsonl"
    questions.write_text(
        "".join(
            json.dumps(
                {
                    "id": f"q{i}",
                    "question": f"Which city is the capital of country number {i}?",
                    "golden_answers": ["Paris"],
                    "metadata": {"split": "train" if i < 3 else "test", "supporting_titles": ["Paris"]},
                }
            )
            + "\n"
            for i in range(6)
        )
    )
    return questions, tmp_path / "bm25"


def tiny_options(questions: Path, index: Path) -> tuple[str, ...]:
    """One step of the tiny model on 2 training and 2 held-out questions, with budgets that keep it quick."""
    return (
        *("--model", "tiny-random", "--index", str(index), "--steps", "1", "--seed", "1"),
        *("--train-questions", str(questions), "--train-split", "train", "--train-limit", "2"),
        *("--eval-questions", str(questions), "--eval-split", "test", "--eval-limit", "2"),
        *("--max-completion-length", "96", "--max-turns", "1", "--max-turn-tokens", "12"),
        *(
            "--max-rollout-tokens",
            "64",
            "--max-obs-tokens",
            "16",
            "--resamples",
            "50",
            "--eval-batch-size",
            "2",
        ),
    )


def run_tiny(
    inputs: tuple[Path, Path], settings: Any, tmp_path: Path, *options: str
) -> tuple[Experiment, StringIO]:
    """``manage.py experiment`` with :func:`tiny_options` and ``options``, to its end; the experiment and stdout."""
    settings.TRAINING_RUNS_DIR = tmp_path / "runs"
    settings.EXPERIMENTS_DIR = tmp_path / "experiments"
    out, err = StringIO(), StringIO()
    call_command("experiment", *tiny_options(*inputs), *options, stdout=out, stderr=err)
    experiment = Experiment.objects.get()
    assert experiment.status == Experiment.Status.FINISHED, experiment.error + err.getvalue()
    return experiment, out


def test_a_one_step_experiment_with_the_tiny_model(
    shared_inputs: tuple[Path, Path], settings: Any, tmp_path: Path
) -> None:
    experiment, out = run_tiny(
        shared_inputs, settings, tmp_path, "--num-generations", "2", "--batch-size", "2"
    )

    links = {(link.role, link.method): link.run for link in experiment.links.select_related("run")}
    assert len(links) == 6 and all(run.status == Run.Status.FINISHED for run in links.values())
    start = Path(settings.EXPERIMENTS_DIR) / str(experiment.pk) / "start-model"
    for method in ("search_r1", "hiprag"):
        train = links[("train", method)]
        assert train.model_name == str(start) and train.config["training"]["max_steps"] == 1
        assert MetricPoint.objects.filter(run=train, step=1, key="searches/mean").exists()
        assert (Path(train.config["output_dir"]) / "config.json").is_file()
        for role in ("start_eval", "eval"):
            assert Trajectory.objects.filter(run=links[(role, method)]).count() == 2
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("judge: evidence — heuristic")
    assert lines[1].split()[:4] == ["Model", "Run", "Steps", "N"]
    table = {line.split("#")[0].strip(): line.split() for line in lines[3:7]}
    assert set(table) == {"start · search_r1", "trained · search_r1", "start · hiprag", "trained · hiprag"}
    assert table["trained · hiprag"][4:6] == ["1", "2"] and table["start · hiprag"][4:6] == ["0", "2"]
    assert "hiprag − search_r1 (trained): runs" in out.getvalue() and "2 paired questions" in out.getvalue()
    # The runner ran it: its spool finished, its log in the experiment's, the app's index folder used as it is.
    folder = Path(settings.EXPERIMENTS_DIR) / str(experiment.pk)
    manifest = json.loads((folder / "spool" / "manifest.json").read_text())
    assert manifest["status"] == "finished" and experiment.spec["spool_id"] == manifest["id"]
    assert "stage runner started (pid " in experiment.log_tail and "] done" in experiment.log_tail
    assert not (folder / "work" / "index-bm25").exists()


def test_a_one_step_two_arm_experiment_of_one_method(
    shared_inputs: tuple[Path, Path], settings: Any, tmp_path: Path
) -> None:
    """HiPRAG's Table 2 in miniature: one format, λp = 0 against λp = 0.4, from the same start."""
    experiment, out = run_tiny(
        shared_inputs,
        settings,
        tmp_path,
        *("--arm", "outcome=hiprag:lambda_p=0", "--arm", "process=hiprag:lambda_p=0.4"),
        *("--questions-per-step", "1", "--num-generations", "2"),
    )
    assert experiment.spec["baseline"] == "outcome"
    assert experiment.spec["arms"] == [
        {"name": "outcome", "method": "hiprag", "params": {"lambda_p": 0}},
        {"name": "process", "method": "hiprag", "params": {"lambda_p": 0.4}},
    ]
    links = {(link.role, link.arm): link.run for link in experiment.links.select_related("run")}
    # One start evaluation for the method both arms share, then train and evaluate each arm.
    assert set(links) == {
        ("start_eval", ""),
        ("train", "outcome"),
        ("eval", "outcome"),
        ("train", "process"),
        ("eval", "process"),
    }
    assert all(run.status == Run.Status.FINISHED for run in links.values())
    for arm, lambda_p in (("outcome", 0), ("process", 0.4)):
        train = links[("train", arm)]
        assert train.method == "hiprag" and train.config["reward"]["params"] == {"lambda_p": lambda_p}
        assert train.config["training"]["lr_scheduler_type"] == "constant"  # the experiment's default
        assert train.config["training"]["per_device_train_batch_size"] == 2  # 1 question × 2 rollouts
        assert links[("eval", arm)].config["params"] == {"lambda_p": lambda_p}
    same = ("model_name", "dataset_id")
    assert [getattr(links[("train", "outcome")], f) for f in same] == [
        getattr(links[("train", "process")], f) for f in same
    ]
    assert (
        links[("train", "outcome")].config["training"]["seed"]
        == links[("train", "process")].config["training"]["seed"]
        == 1
    )
    lines = out.getvalue().splitlines()
    table = {line.split("#")[0].strip(): line.split() for line in lines[3:6]}
    assert set(table) == {"start · hiprag", "trained · outcome", "trained · process"}
    assert table["trained · process"][4:6] == ["1", "2"]  # steps, N
    text = out.getvalue()
    assert "process − outcome (trained): runs" in text and "2 paired questions" in text
    assert "outcome: trained − start" in text and "process: trained − start" in text
