"""The demo's judge-corrected OSR/USR, as the HiPRAG run's evaluation report shows them.

Seeds the demo data into a fresh SQLite database (a temporary folder; nothing else is touched), then prints, per
judge version of the run "HiPRAG (demo)", the raw rate, its 95% interval, the corrected rate (Rogan–Gladen with the
demo audit's sensitivity and specificity), its 95% interval, and the audit's counts — or why there is none.

    .venv/bin/python bench/demo_corrected_rates.py
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
FOLDER = tempfile.mkdtemp(prefix="searchlab-corrected-")
os.environ["SEARCHLAB_VAR_DIR"] = FOLDER
os.environ["DATABASE_URL"] = f"sqlite:///{FOLDER}/db.sqlite3"
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402

from webapp.audits.correction import run_corrections  # noqa: E402
from webapp.demo.services import demo_seed  # noqa: E402
from webapp.runs.models import Run  # noqa: E402


def main() -> None:
    call_command("migrate", verbosity=0)
    demo_seed()
    run = Run.objects.get(name="HiPRAG (demo)")
    print(f"run #{run.pk} {run.name}: judge-corrected rates (percent, 95% intervals)")
    print(
        "| judge version | rate | flagged / judged | raw | raw 95% CI | corrected | 95% CI | se | sp | TP FP FN TN |"
    )
    print("|---|---|---:|---:|---|---:|---|---:|---:|---|")
    for correction in run_corrections(run_id=run.pk):
        for d in correction.detectors:
            c = d.counts
            print(
                f"| {correction.version.name} | {d.metric} | {d.n_flagged} / {d.n_judged} | {d.raw_shown} | "
                f"{d.raw_interval} | {d.corrected_shown} | {d.interval} | {d.sensitivity_shown} | "
                f"{d.specificity_shown} | {c.tp} {c.fp} {c.fn} {c.tn} |"
            )
            if d.reason:
                print(f"|  | {d.metric}: no corrected rate: {d.reason} |")
        audit = correction.audit
        state = f"audit #{audit.pk} ({audit.status}{', provisional' if correction.provisional else ''})"
        print(f"(corrected by {state if audit else 'no audit'})")


if __name__ == "__main__":
    import shutil

    try:
        main()
    finally:
        shutil.rmtree(FOLDER, ignore_errors=True)
