"""A simulated HiPRAG training run whose over-search judge drifts, audited by training step: the drift chart's data.

    DATABASE_URL=sqlite:///var/x/db.sqlite3 python bench/audit_drift_demo.py [--steps 60] [--per-step 6] [--audit 150]

Loads the demo's users (``webapp.demo.services.demo_seed``), then writes one training run of ``--steps`` training
steps × ``--per-step`` trajectories, each with 1–3 search steps and one non-search step, and judge verdicts from a
scripted judge whose behaviour is known:

* over-search: the true rate falls from 30% to 8% over training (the policy learns to search less), and the judge's
  sensitivity falls from 0.92 to 0.55 (the policy also learns searches the judge accepts), specificity 0.95;
* under-search: a true rate of 15% throughout, sensitivity 0.85, specificity 0.93.

An audit of ``--audit`` trajectories stratified by training step (early, middle, late) is created with ``ann`` as
annotator, and ``ann``'s labels are the truth. Printed per detector and phase: the true rate, the judge's raw rate
and the rate corrected with that phase's audit (``webapp.audits.strata``), so the chart's figures can be checked
against the truth. The audit report (``/audits/<id>/report/``) and the run page show the chart.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.db import transaction  # noqa: E402

from webapp.audits.services import audit_create, label_save  # noqa: E402
from webapp.audits.strata import strata_report  # noqa: E402
from webapp.datasets.models import Question  # noqa: E402
from webapp.demo.services import demo_seed  # noqa: E402
from webapp.runs.models import Run  # noqa: E402
from webapp.runs.services import run_create, run_mark_finished  # noqa: E402
from webapp.trajectories.judge_versions import VersionResolver  # noqa: E402
from webapp.trajectories.models import JudgeVerdict, Step, Trajectory  # noqa: E402

JUDGE = "scripted-judge (simulated drift)"


def _lerp(start: float, end: float, fraction: float) -> float:
    return start + (end - start) * fraction


def write_run(*, steps: int, per_step: int, seed: int) -> tuple[Run, dict[int, bool], dict[str, list[float]]]:
    """The run, every step's true answer (step id → flagged by the truth), and the true rates per phase."""
    rng = random.Random(seed)
    rey = get_user_model().objects.get(username="rey")
    run = run_create(
        name="HiPRAG training · judge drift (simulated)",
        method="hiprag",
        model_name="demo-agent",
        kind=Run.Kind.TRAIN,
        algorithm=Run.Algorithm.GRPO,
        created_by=rey,
    )
    # The judge's settings, so its verdicts get a "scripted" judge version (webapp.trajectories.judge_versions).
    Run.objects.filter(pk=run.pk).update(judge_settings={"kind": "scripted"})
    version_id = VersionResolver().version_id(run.pk, JUDGE)
    questions = list(Question.objects.order_by("pk")[:50])
    truth: dict[int, bool] = {}
    for training_step in range(steps):
        fraction = training_step / max(1, steps - 1)
        over_rate, over_se = _lerp(0.30, 0.08, fraction), _lerp(0.92, 0.55, fraction)
        for k in range(per_step):
            question = questions[(training_step * per_step + k) % len(questions)] if questions else None
            n_search = rng.randint(1, 3)
            trajectory = Trajectory.objects.create(
                run=run,
                question=question,
                dataset=question.dataset if question else None,
                question_text=question.text if question else f"question {training_step}.{k}",
                golden_answers=question.golden_answers if question else [],
                training_step=training_step,
                format="hiprag",
                raw_text="(simulated)",
                format_ok=True,
                n_steps=n_search + 1,
                n_searches=n_search,
            )
            for index in range(n_search + 1):
                search = index < n_search
                step = Step.objects.create(
                    trajectory=trajectory,
                    run=run,
                    index=index,
                    kind=Step.Kind.SEARCH if search else Step.Kind.NON_SEARCH,
                    reasoning="(simulated step)",
                    query=f"search {index + 1} for: {trajectory.question_text[:80]}" if search else None,
                    conclusion=None if search else "(simulated conclusion)",
                )
                rate, se, sp = (over_rate, over_se, 0.95) if search else (0.15, 0.85, 0.93)
                positive = rng.random() < rate
                flagged = rng.random() < (se if positive else 1 - sp)
                JudgeVerdict.objects.create(
                    trajectory=trajectory,
                    step=step,
                    detector=JudgeVerdict.Detector.OVER_SEARCH
                    if search
                    else JudgeVerdict.Detector.UNDER_SEARCH,
                    outcome=JudgeVerdict.Outcome.TRUE if flagged else JudgeVerdict.Outcome.FALSE,
                    judge_model=JUDGE,
                    version_id=version_id,
                )
                truth[step.pk] = positive
    run_mark_finished(run_id=run.pk)
    return run, truth, {}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--per-step", type=int, default=6)
    parser.add_argument("--audit", type=int, default=150)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.steps < 3 or args.per_step < 1 or args.audit < 3:
        parser.error("--steps ≥ 3, --per-step ≥ 1 and --audit ≥ 3 are required")
    demo_seed()
    with transaction.atomic():
        run, truth, _ = write_run(steps=args.steps, per_step=args.per_step, seed=args.seed)
        ann = get_user_model().objects.get(username="ann")
        audit = audit_create(
            name="Judge drift over training (audit by step)",
            run_ids=[run.pk],
            sample_size=args.audit,
            seed=args.seed,
            stratification="step",
            annotators=[ann],
        )
        for item in audit.items.select_related("trajectory"):
            for step in item.trajectory.steps.all():
                if step.kind == Step.Kind.SEARCH:
                    label = "unnecessary" if truth[step.pk] else "necessary"
                else:
                    label = "should_search" if truth[step.pk] else "correct"
                label_save(item=item, annotator=ann, step_id=step.pk, label=label)
    report = strata_report(audit=audit)
    assert report is not None
    print(f"run #{run.pk}: /runs/{run.pk}/ · audit #{audit.pk}: /audits/{audit.pk}/report/")
    phase_of = {row.stratum: row for row in report.strata}
    print(f"strata: {', '.join(f'{s} {r.n_sampled} of {r.population:.0f}' for s, r in phase_of.items())}")
    print(
        f"{'detector':<13} {'phase':<7} {'steps':>7} {'true':>6} {'raw':>6} {'corrected':>9} {'95% CI':>15}"
    )
    for drift in report.drift:
        kind = Step.Kind.SEARCH if drift.detector.name == "over_search" else Step.Kind.NON_SEARCH
        for point in drift.points:
            ids = Step.objects.filter(
                run=run,
                kind=kind,
                trajectory__training_step__gte=point.first_step,
                trajectory__training_step__lte=point.last_step,
            ).values_list("pk", flat=True)
            true_rate = sum(truth[i] for i in ids) / len(ids)
            rate = point.rate
            interval = f"[{rate.low:.3f}, {rate.high:.3f}]" if rate.low is not None else (rate.reason or "—")
            corrected = f"{rate.corrected:.3f}" if rate.corrected is not None else "—"
            print(
                f"{drift.detector.name:<13} {point.phase:<7} {point.first_step:>3}–{point.last_step:<3} "
                f"{true_rate:>6.3f} {rate.raw or 0:>6.3f} {corrected:>9} {interval:>15}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
