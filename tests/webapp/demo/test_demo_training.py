"""`manage.py demo` ends ready to train: the demo index built, the warm-started model recorded as a run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainer.warm_start import DEMO_RECIPE
from webapp.corpora.models import Index
from webapp.demo.services import demo_prepare_training, demo_seed
from webapp.runs.models import MetricPoint, Run
from webapp.training.forms import TrainingRunForm

pytestmark = [pytest.mark.django_db, pytest.mark.slow]  # builds a MiniLM index of the demo corpus


def _finished_warm_start(var: Path) -> Path:
    """What trainer.warm_start leaves behind, without the CPU minutes (its own tests train for real)."""
    base = var / "models" / "SmolLM2-135M-Instruct"
    warm = var / "models" / "SmolLM2-135M-Instruct-warm"
    for folder in (base, warm):
        folder.mkdir(parents=True)
        (folder / "config.json").write_text("{}")
    (warm / "warm_start.json").write_text(json.dumps({"demo_recipe": DEMO_RECIPE}))
    (warm / "warm_start_config.json").write_text(
        json.dumps({"methods": ["hiprag", "search_r1"], "model": {"path": str(base)}})
    )
    (warm / "metrics.jsonl").write_text(
        "".join(
            json.dumps({"step": s, "time": 1.0e9 + s, "key": "loss", "value": 1.0 / s}) + "\n" for s in (1, 2)
        )
    )
    return warm


def test_the_demo_is_ready_to_train_with_the_warm_model_on_its_index(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    settings.RETRIEVAL_INDEX_DIR = tmp_path / "indexes"
    settings.RETRIEVAL_EMBEDDINGS_DIR = tmp_path / "embeddings"
    demo_seed()
    warm = _finished_warm_start(tmp_path)
    said: list[str] = []

    demo_prepare_training(say=said.append)
    demo_prepare_training(say=said.append)  # idempotent: nothing is built or recorded twice

    index = Index.objects.get()
    assert index.status == Index.Status.READY and index.corpus.name == "demo"
    run = Run.objects.get(kind=Run.Kind.WARM_START)
    assert (run.status, run.algorithm, run.config["output_dir"]) == ("finished", "sft", str(warm))
    assert list(MetricPoint.objects.filter(run=run, key="loss").values_list("step", flat=True)) == [1, 2]
    assert sum("building the demo index" in line for line in said) == 1
    form = TrainingRunForm()
    assert form.fields["model_path"].initial == str(warm)
    assert (form.fields["rollout"].initial, form.fields["index"].initial) == ("agent", index.pk)
    assert form.fields["dataset"].initial is not None  # the demo's multi-hop questions


def test_a_warm_model_of_a_newer_recipe_is_recorded_as_a_run_of_its_own(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    settings.RETRIEVAL_INDEX_DIR = tmp_path / "indexes"
    settings.RETRIEVAL_EMBEDDINGS_DIR = tmp_path / "embeddings"
    demo_seed()
    _finished_warm_start(tmp_path)
    older = Run.objects.create(
        name="SmolLM2 warm start (demo)",
        kind=Run.Kind.WARM_START,
        algorithm=Run.Algorithm.SFT,
        model_name=str(tmp_path / "models" / "SmolLM2-135M-Instruct"),
        status=Run.Status.FINISHED,
        config={"output_dir": "…"},  # recorded before recipes were: recipe 1
    )

    demo_prepare_training(say=lambda _: None)

    newer = Run.objects.filter(kind=Run.Kind.WARM_START).exclude(pk=older.pk).get()
    assert newer.config["demo_recipe"] == DEMO_RECIPE


def test_a_long_warm_start_says_its_step_and_eta_on_the_terminal(tmp_path):
    import time

    from trainer.progress import ProgressReporter
    from webapp.demo.services import progress_lines

    said: list[str] = []

    def wait_for(prefix: str) -> str:
        """The watcher's next line with this prefix (no fixed sleep: a loaded machine may be slow to run it)."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if said and said[-1].startswith(prefix):
                return said[-1]
            time.sleep(0.01)
        raise AssertionError(f"no line starting {prefix!r}: {said}")

    progress = ProgressReporter(tmp_path, min_interval=0)
    with progress_lines(tmp_path, said.append, every=0.02):
        progress.begin_step(1, 42, "train", "supervised warm start")
        assert wait_for("  step 1 ") == "  step 1 of 42: training (supervised warm start)"
        progress.end_step(next_phase="train")
        progress.begin_step(2, 42, "train", "supervised warm start")
        line = wait_for("  step 2 ")
    assert line.startswith("  step 2 of 42: training (supervised warm start), about ") and line.endswith(
        " left"
    )
    assert len(said) == len(set(said))  # a line only when it changed
