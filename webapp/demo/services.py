"""The demo's data: the team-written corpus, questions and trajectories in demo/, two runs to compare, an audit."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction

from webapp.accounts.models import Role
from webapp.accounts.services import token_get_or_create, user_create
from webapp.audits.demo_labels import demo_judge_load, demo_labels_load
from webapp.audits.models import Audit
from webapp.audits.services import audit_create
from webapp.corpora.services import corpus_import
from webapp.datasets.models import Dataset
from webapp.datasets.services import dataset_import
from webapp.evaluation.services import evaluation_report_ensure
from webapp.runs.models import Run
from webapp.runs.services import run_create, run_mark_finished
from webapp.trajectories.services import trajectory_import

DEMO_DIR = settings.BASE_DIR / "demo"
DEMO_DATASETS = (
    "demo_multihop",
    "demo_single",
)  # demo/questions.jsonl's data sources, named by the trajectories
# Demo people and their passwords: printed by `manage.py demo`, for a local machine only.
DEMO_USERS = (
    ("ada", Role.ADMIN),
    ("rey", Role.RESEARCHER),
    ("ann", Role.ANNOTATOR),
    ("bea", Role.ANNOTATOR),  # the audit's second annotator (demo/audit_labels.jsonl)
)


@dataclass(frozen=True)
class DemoSeed:
    created: bool
    token: str


@transaction.atomic
def demo_seed(*, demo_dir: Path = DEMO_DIR) -> DemoSeed:
    """Load the demo data once (idempotent: a second call changes nothing)."""
    from django.contrib.auth import get_user_model

    users = {}
    for username, role in DEMO_USERS:
        existing = get_user_model().objects.filter(username=username).first()
        users[username] = existing or user_create(username=username, password=f"{username}-demo", role=role)
    token = token_get_or_create(user=users["rey"])
    if Dataset.objects.filter(name__in=DEMO_DATASETS).exists():
        return DemoSeed(created=False, token=token)

    corpus_import(name="demo", path=demo_dir / "corpus.jsonl")
    with tempfile.TemporaryDirectory() as folder:
        # One dataset per data source: the trajectory lines name "demo_multihop" or "demo_single".
        lines = (demo_dir / "questions.jsonl").read_text(encoding="utf-8").splitlines()
        for name in DEMO_DATASETS:
            part = Path(folder) / f"{name}.jsonl"
            chosen = [line for line in lines if json.loads(line)["metadata"]["data_source"] == name]
            part.write_text("".join(f"{line}\n" for line in chosen), encoding="utf-8")
            dataset_import(name=name, path=part, display_name=f"demo/questions.jsonl ({name})")
    baseline = run_create(
        name="Search-R1 baseline (demo)", method="search_r1", model_name="demo-agent", created_by=users["rey"]
    )
    hiprag = run_create(
        name="HiPRAG (demo)",
        method="hiprag",
        model_name="demo-agent",
        created_by=users["rey"],
        base_run_id=baseline.pk,
    )
    for run, name in ((baseline, "search_r1"), (hiprag, "hiprag")):
        # Each line names its method and carries the team's step verdicts: the import scores it with scoring/.
        trajectory_import(path=demo_dir / f"trajectories_{name}.jsonl", run_id=run.pk)
        Run.objects.filter(pk=run.pk).update(status=Run.Status.FINISHED)
    # A judge's replies (team-written, HiPRAG's judge format) beside the team's verdicts: a judge version to audit.
    demo_judge_load(run_id=hiprag.pk, path=demo_dir / "verdicts_hiprag_scripted.jsonl")
    for run in (baseline, hiprag):  # their reports now, so the runs list shows their numbers on first login
        evaluation_report_ensure(run_id=run.pk)
    audit = audit_create(
        name="Over-/under-search audit (demo)",
        run_ids=[hiprag.pk],
        # Stratified by dataset, so the audit holds both multi-hop (search) and single-hop (non-search) steps.
        sample_size=8,
        seed=0,
        stratification="dataset",
        annotators=[users["ann"], users["bea"]],
        annotators_per_item=2,
        created_by=users["rey"],
        guidelines="For each search step: was the search necessary? For each non-search step: is it "
        "correct, or should the agent have searched?",
    )
    # Two annotators' labels (ann leaves two trajectories to label) and one adjudicated disagreement.
    demo_labels_load(audit=audit, path=demo_dir / "audit_labels.jsonl", users=users)
    demo_training_audit(demo_dir=demo_dir, users=users)
    return DemoSeed(created=True, token=token)


DEMO_TRAINING_RUN = "HiPRAG training (demo)"
DEMO_DRIFT_AUDIT = "Judge drift over training (audit by step)"


def demo_training_audit(*, demo_dir: Path, users: dict[str, Any]) -> Audit:
    """The demo's small HiPRAG training run (demo/training_hiprag.jsonl: 12 steps × 8 trajectories, verdicts of a
    scripted judge whose over-search sensitivity drifts) and its audit by training step, labelled by ann and bea
    with rey's adjudications (demo/training_audit_labels.jsonl): the drift chart on the audit report and the run
    page at first login. Both files are written by demo/make_training_audit_data.py."""
    run = run_create(
        name=DEMO_TRAINING_RUN,
        method="hiprag",
        model_name="demo-agent",
        kind=Run.Kind.TRAIN,
        algorithm=Run.Algorithm.GRPO,
        created_by=users["rey"],
    )
    # The judge's settings, so its verdicts get a "scripted" judge version (webapp.trajectories.judge_versions).
    Run.objects.filter(pk=run.pk).update(judge_settings={"kind": "scripted"})
    trajectory_import(path=demo_dir / "training_hiprag.jsonl", run_id=run.pk)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.FINISHED)
    audit = audit_create(
        name=DEMO_DRIFT_AUDIT,
        run_ids=[run.pk],
        # 16 trajectories in each third of the run's training steps (early, middle, late).
        sample_size=48,
        seed=0,
        stratification=Audit.Stratification.STEP,
        annotators=[users["ann"], users["bea"]],
        annotators_per_item=2,
        created_by=users["rey"],
        guidelines="Does the judge stay right as the policy trains? For each search step: was the search "
        "necessary? For each non-search step: is it correct, or should the agent have searched?",
    )
    demo_labels_load(audit=audit, path=demo_dir / "training_audit_labels.jsonl", users=users)
    return audit


DEMO_WARM_START_NAME = "SmolLM2 warm start (demo)"


def demo_prepare_index(*, say: Callable[[str], None] = print) -> None:
    """The demo corpus's index, built once (the new-run form's default index)."""
    from retrieval.encoders import DEFAULT_ENCODER
    from webapp.corpora.models import Corpus, Index
    from webapp.corpora.services import index_build, index_create

    corpus = Corpus.objects.filter(name="demo").first()
    if corpus is not None and not corpus.indexes.filter(status=Index.Status.READY).exists():
        say("building the demo index (flat, all-MiniLM-L6-v2)…")
        index = index_create(corpus=corpus, kind=Index.Kind.FLAT, encoder=DEFAULT_ENCODER, enqueue=False)
        index_build(index_id=index.pk)


def demo_mark_orphans_crashed() -> list[int]:
    """Before the demo's workers start: runs still marked running whose supervisor is gone (a demo killed with
    SIGKILL, a machine that rebooted) are marked crashed now, not a heartbeat timeout later, so a warm start left
    half-way is started afresh instead of being waited for."""
    import datetime as dt

    from django.utils import timezone

    from webapp.training.services import training_mark_crashed

    later = timezone.now() + dt.timedelta(seconds=settings.TRAINING_HEARTBEAT_TIMEOUT_SECONDS + 1)
    return training_mark_crashed(now=later)


def demo_warm_start(*, say: Callable[[str], None] = print) -> Run | None:
    """The demo's warm-started SmolLM2 (idempotent). Made already (recipe ``DEMO_RECIPE``): recorded once as a
    finished warm-start run with its loss curve, ``None`` returned. Not made yet: a warm-start run of the demo's
    recipe, queued for the train worker (or the one already queued or running), returned at once — the web app
    serves while it trains, and its page shows its phase, loss curve and ETA. ``None`` too when
    ``python -m agent.setup_model`` has not made SmolLM2."""
    from trainer.warm_start import (
        DEMO_RECIPE,
        WARM_MODEL_NAME,
        demo_warm_model_recipe,
        demo_warm_start_values,
    )
    from webapp.demo.selectors import demo_warm_start_active

    var = Path(settings.VAR_DIR)
    if not (var / "models" / "SmolLM2-135M-Instruct" / "config.json").is_file():
        say("no SmolLM2 under VAR_DIR/models: run `python -m agent.setup_model` (make demo does) to train it")
        return None
    target = var / "models" / WARM_MODEL_NAME
    recipe = demo_warm_model_recipe(target)
    if recipe == DEMO_RECIPE:
        # Recorded once per recipe: a model rebuilt by a newer recipe gets its own run and loss curve.
        if not Run.objects.filter(
            kind=Run.Kind.WARM_START, status=Run.Status.FINISHED, config__demo_recipe=DEMO_RECIPE
        ).exists():
            _record_warm_start(target, DEMO_RECIPE)
        return None
    active = demo_warm_start_active()
    if active is not None:
        return active
    # An unfinished folder (a warm start stopped half-way) or an older recipe's model: rebuilt from scratch, so
    # the new run's loss curve holds its own points only.
    shutil.rmtree(target, ignore_errors=True)
    values = demo_warm_start_values(var, Path(settings.SHARED_DIR))
    run = _start_warm_start(values)
    older = f" (the cached one is of recipe {recipe}, now {DEMO_RECIPE}: rebuilt)" if recipe else ""
    say(
        f"warm-starting SmolLM2 on demonstrations of HiPRAG's and Search-R1's formats{older} in the background: "
        f"warm-start run #{run.pk}, about {DEMO_WARM_START_MINUTES} minutes on 2 cores; the runs page shows its "
        "phase, loss curve and ETA"
    )
    return run


# What the demo says the warm start takes on a 2-core machine (docs/warm_start.md has the measurements).
DEMO_WARM_START_MINUTES = "15–25"


@transaction.atomic
def _start_warm_start(values: dict[str, object]) -> Run:
    """A pending warm-start run of ``values`` (trainer.warm_start's config) and its supervisor task on commit, as
    the warm-start form's service makes one, without a dataset: the demo's questions file is read in place."""
    from trainer.warm_start import warm_start_config
    from webapp.training.models import TrainingProcess
    from webapp.training.services import run_dir_for
    from webapp.training.tasks import training_supervise_task

    config = warm_start_config(values)
    run = run_create(
        name=DEMO_WARM_START_NAME,
        method=config.methods[0],
        model_name=config.model.path,
        kind=Run.Kind.WARM_START,
        algorithm=Run.Algorithm.SFT,
    )
    run.config = config.to_dict()
    run.save(update_fields=["config"])
    TrainingProcess.objects.create(run=run, run_dir=str(run_dir_for(run.pk)))
    transaction.on_commit(lambda: training_supervise_task.delay(run.pk))
    return run


def demo_prepare_training(*, say: Callable[[str], None] = print) -> None:
    """Make the demo ready to train in this process (idempotent, for tests and scripts): the demo index, and the
    warm-started SmolLM2 made now (``ensure_demo_warm_model``, its step and ETA said each minute) and recorded as a
    finished warm-start run. ``manage.py demo`` does not wait for it: :func:`demo_warm_start`."""
    from trainer.warm_start import WARM_MODEL_NAME, ensure_demo_warm_model

    demo_prepare_index(say=say)
    var = Path(settings.VAR_DIR)
    if (var / "models" / "SmolLM2-135M-Instruct" / "config.json").is_file():
        target = var / "models" / WARM_MODEL_NAME
        with progress_lines(target, say):
            ensure_demo_warm_model(var, Path(settings.SHARED_DIR))
    demo_warm_start(say=say)


def demo_stop_everything(
    *, reason: str, workers: Sequence[subprocess.Popen[bytes]], grace: float = 20.0
) -> list[int]:
    """``manage.py demo`` is ending: stop every trainer and warm start (their runs cancelled, with ``reason``), then
    the worker processes (and Celery beat inside one), then mark any run still active as crashed with ``reason``:
    nothing the demo started is left running or marked running. Returns the runs it ended."""
    from webapp.training.models import TrainingProcess
    from webapp.training.services import training_stop_request

    active = list(Run.objects.filter(status__in=Run.ACTIVE_STATUSES).values_list("pk", flat=True))
    for run_id in active:
        training_stop_request(run_id=run_id)  # the supervisor sends SIGINT on its next beat, then kills

    def trainer_groups() -> list[int]:
        return [
            pid
            for pid in TrainingProcess.objects.filter(run_id__in=active, pid__isnull=False).values_list(
                "pid", flat=True
            )
            if pid
        ]

    # Not only through the supervisor: a worker in its own shutdown may not beat again.
    for pid in trainer_groups():
        _signal_group(pid, signal.SIGINT)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(_group_alive(pid) for pid in trainer_groups()):
        time.sleep(0.2)
    for pid in trainer_groups():
        _signal_group(pid, signal.SIGKILL)
    for worker in workers:  # warm shutdown: a supervisor task records its run's end and returns
        _signal_group(worker.pid, signal.SIGTERM)
    for worker in workers:
        with contextlib.suppress(subprocess.TimeoutExpired):
            worker.wait(timeout=max(5.0, deadline - time.monotonic()))
    for worker in workers:  # beat and anything else in the worker's group
        _signal_group(worker.pid, signal.SIGKILL)
        worker.wait()
    for pid in trainer_groups():
        _signal_group(pid, signal.SIGKILL)
    for run_id in active:
        run = run_mark_finished(run_id=run_id, status=Run.Status.CRASHED, error=reason)
        if run.status == Run.Status.CANCELLED and not run.error:
            Run.objects.filter(pk=run_id).update(error=reason)
    return active


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextmanager
def progress_lines(folder: Path, say: Callable[[str], None], *, every: float = 60.0) -> Iterator[None]:
    """While a job writes its heartbeat into ``folder`` (trainer.progress), say where it is every ``every`` seconds
    when that changed: the step, the phase and the ETA the run page shows. Forty silent minutes read as a hang."""
    from trainer.progress import read_progress
    from webapp.runs.progress_view import progress_view

    stop = threading.Event()

    def watch() -> None:
        last = ""
        while not stop.wait(every):
            view = progress_view(read_progress(folder))
            if view is None:
                continue
            step = f"step {view.step} of {view.max_steps}: " if view.max_steps else ""  # none while loading
            line = f"  {step}{view.phase}" + (f", {view.eta}" if view.eta else "")
            if line != last:
                say(line)
                last = line

    thread = threading.Thread(target=watch, name="progress-lines", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def _record_warm_start(folder: Path, recipe: int) -> Run:
    """The demo's warm start as a finished run of kind warm_start, with its loss curve and config."""
    from webapp.training import ingest
    from webapp.training.services import training_metrics_store

    config = json.loads((folder / "warm_start_config.json").read_text(encoding="utf-8"))
    run = run_create(
        name="SmolLM2 warm start (demo)",
        method=config["methods"][0],
        model_name=config["model"]["path"],
        kind=Run.Kind.WARM_START,
        algorithm=Run.Algorithm.SFT,
    )
    rows, _ = ingest.read_new_lines(folder / "metrics.jsonl", 0)
    training_metrics_store(run_id=run.pk, rows=ingest.metric_rows(rows), offset=0)
    Run.objects.filter(pk=run.pk).update(
        status=Run.Status.FINISHED, config={**config, "output_dir": str(folder), "demo_recipe": recipe}
    )
    return run
