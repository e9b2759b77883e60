"""The demo's judge drift over training, as its audit report and the "HiPRAG training (demo)" run page show it.

Seeds the demo data into a fresh SQLite database (a temporary folder; nothing else is touched), times the seeding,
then prints, per detector and training phase of the demo's audit by training step, the audited trajectories, the
judge's sensitivity and specificity against the adjudicated human answers, the run's true rate (ann's labels of
every step, which are the truth the data was written from: demo/make_training_audit_data.py), the judge's raw rate
and the rate corrected with that phase's audit, with its 95% interval.

    .venv/bin/python bench/demo_drift.py
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
FOLDER = tempfile.mkdtemp(prefix="searchlab-drift-")
os.environ["SEARCHLAB_VAR_DIR"] = FOLDER
os.environ["DATABASE_URL"] = f"sqlite:///{FOLDER}/db.sqlite3"
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402

from webapp.audits.models import Audit  # noqa: E402
from webapp.audits.strata import strata_report  # noqa: E402
from webapp.demo.services import DEMO_DIR, DEMO_DRIFT_AUDIT, DEMO_TRAINING_RUN, demo_seed  # noqa: E402
from webapp.runs.models import Run  # noqa: E402

POSITIVE = {"unnecessary", "should_search", "incorrect"}


def _truth() -> dict[tuple[str, int], list[bool]]:
    """(detector, training step) → ann's answers on every step of the run (the data's truth)."""
    runs = [json.loads(line) for line in (DEMO_DIR / "training_hiprag.jsonl").read_text().splitlines()]
    detector = {(r["question_id"], r["step"], v["step"]): v["detector"] for r in runs for v in r["verdicts"]}
    found: dict[tuple[str, int], list[bool]] = {}
    for line in (DEMO_DIR / "training_audit_labels.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record.get("annotator") != "ann":
            continue
        key = (record["question_id"], record["training_step"], record["step"])
        found.setdefault((detector[key], record["training_step"]), []).append(record["label"] in POSITIVE)
    return found


def main() -> None:
    call_command("migrate", verbosity=0)
    started = time.perf_counter()
    demo_seed()
    seconds = time.perf_counter() - started
    run = Run.objects.get(name=DEMO_TRAINING_RUN)
    audit = Audit.objects.get(name=DEMO_DRIFT_AUDIT)
    report = strata_report(audit=audit)
    assert report is not None
    truth = _truth()
    print(f"demo_seed: {seconds:.2f} s (the whole demo, this run and its audit included)")
    print(f"run #{run.pk} {run.name} · audit #{audit.pk} {audit.name}: /audits/{audit.pk}/report/#drift")
    print(
        "| detector | judge | phase | training steps | audited | se | sp | true rate | raw | corrected | 95% CI |"
    )
    print("|---|---|---|---|---:|---:|---:|---:|---:|---:|---|")
    for drift in report.drift:
        for point in drift.points:
            answers = [
                value
                for step in range(point.first_step, point.last_step + 1)
                for value in truth.get((drift.detector.name, step), [])
            ]
            rate, accuracy = point.rate, point.accuracy

            def shown(value: float | None) -> str:
                return "—" if value is None else f"{value:.3f}"

            interval = f"[{rate.low:.3f}, {rate.high:.3f}]" if rate.low is not None else (rate.reason or "—")
            print(
                f"| {drift.detector.name} | {drift.judge} | {point.phase} | {point.first_step}–{point.last_step} | "
                f"{point.n_audited} | {shown(accuracy.sensitivity)} | {shown(accuracy.specificity)} | "
                f"{sum(answers) / len(answers):.3f} | {shown(rate.raw)} | {shown(rate.corrected)} | {interval} |"
            )


if __name__ == "__main__":
    main()
