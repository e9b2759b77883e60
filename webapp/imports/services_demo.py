"""The demo's data: the team-written corpus, questions and trajectories in demo/, two runs to compare, an audit."""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import transaction

from webapp.accounts.models import Role
from webapp.accounts.services import token_get_or_create, user_create
from webapp.audits.services import audit_create
from webapp.corpora.services import corpus_import
from webapp.datasets.models import Dataset
from webapp.datasets.services import dataset_import
from webapp.runs.models import Run
from webapp.runs.services import run_create
from webapp.trajectories.services import trajectory_import

DEMO_DIR = settings.BASE_DIR / "demo"
DEMO_DATASETS = (
    "demo_multihop",
    "demo_single",
)  # demo/questions.jsonl's data sources, named by the trajectories
# Demo people and their passwords: printed by `manage.py demo`, for a local machine only.
DEMO_USERS = (("ada", Role.ADMIN), ("rey", Role.RESEARCHER), ("ann", Role.ANNOTATOR))


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
    audit_create(
        name="Over-/under-search audit (demo)",
        run_ids=[hiprag.pk],
        # Stratified by dataset, so the audit holds both multi-hop (search) and single-hop (non-search) steps.
        sample_size=8,
        seed=0,
        stratification="dataset",
        annotators=[users["ann"]],
        created_by=users["rey"],
        guidelines="For each search step: was the search necessary? For each non-search step: is it "
        "correct, or should the agent have searched?",
    )
    return DemoSeed(created=True, token=token)
