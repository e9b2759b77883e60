"""Benchmark of a judge audit at HiPRAG's scale: 200 trajectories (800 steps) × 3 annotators on each.

1. Creates the audit: a run of trajectories with four steps each, judged by an LLM judge and by the evidence judge,
   sampled into an audit of 200 trajectories with three annotators per trajectory.
2. Three annotators label every step of their queue at once through the web endpoints (login, resume, the
   workspace page, the htmx label post with CSRF) against gunicorn, the way the browser does, without pauses.
3. Prints the label save latency (target p95 <= 50 ms), the next-trajectory page latency, labels sent / stored
   (target: equal), and how long the report, closing (freezing the report) and the export take at this size.

It works in a database of its own (Django's test database, ``test_<name>``: created, migrated, dropped at the end).
Run against PostgreSQL:

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/test nice .venv/bin/python bench/audit.py
"""

from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")

import django  # noqa: E402

django.setup()

import requests  # noqa: E402
from django.db import connection, transaction  # noqa: E402

from bench.api import database_url_for, free_port, hiprag_response, tree_cpu_seconds  # noqa: E402
from scoring import formats  # noqa: E402
from webapp.accounts.models import Role  # noqa: E402
from webapp.accounts.services import user_create  # noqa: E402
from webapp.audits import export, report  # noqa: E402
from webapp.audits.models import Audit, Label  # noqa: E402
from webapp.audits.services import LABELS_BY_KIND, audit_create, audit_transition  # noqa: E402
from webapp.datasets.models import Dataset, Question  # noqa: E402
from webapp.runs.services import run_create  # noqa: E402
from webapp.trajectories.judge_versions import VersionResolver  # noqa: E402
from webapp.trajectories.models import JudgeVerdict, Step  # noqa: E402
from webapp.trajectories.services import TrajectoryInput, trajectory_bulk_create  # noqa: E402

T = TypeVar("T")
JUDGES = ("gpt-4.1-mini", "evidence-heuristic")
PASSWORD = "bench-password-123456"
STEP_PATTERN = re.compile(r'<li class="step step-(search|non_search)" tabindex="0" data-step="(\d+)">')
NEXT_PATTERN = re.compile(r'<a href="(/audits/queue/items/\d+/)" data-key="n">')


def create_audit(n_trajectories: int, n_annotators: int, per_item: int) -> Audit:
    """A run with a few more trajectories than the sample (so sampling chooses), verdicts of two judges on every
    step, and the audit."""
    rng = random.Random(0)
    dataset = Dataset.objects.create(name="bench-audit")
    Question.objects.bulk_create(
        Question(
            dataset=dataset, external_id=f"q{i}", text=f"Who directed film {i}?", golden_answers=[f"P{i}"]
        )
        for i in range(n_trajectories)
    )
    questions = list(Question.objects.filter(dataset=dataset).order_by("id"))
    run = run_create(name="bench-audit", method="hiprag", model_name="bench-model")
    items = []
    for n in range(n_trajectories + n_trajectories // 5):
        question = questions[n % len(questions)]
        items.append(
            TrajectoryInput(
                parsed=formats.parse("hiprag", hiprag_response(rng, n)),
                golden_answers=question.golden_answers,
                question_text=question.text,
                question_id=question.pk,
                dataset_id=dataset.pk,
                run_id=run.pk,
            )
        )
    with transaction.atomic():
        trajectory_bulk_create(items=items)
    detector = {Step.Kind.SEARCH: "over_search", Step.Kind.NON_SEARCH: "under_search"}
    steps = Step.objects.filter(run=run).values_list("id", "trajectory_id", "kind")
    versions = VersionResolver()  # each verdict carries its judge version, as trajectory_bulk_create's do
    JudgeVerdict.objects.bulk_create(
        JudgeVerdict(
            step_id=step_id,
            trajectory_id=trajectory_id,
            detector=detector[kind],
            judge_model=judge,
            version_id=versions.version_id(run.pk, judge),
            outcome=rng.choices(["false", "true", "error"], weights=[80, 18, 2])[0],
        )
        for step_id, trajectory_id, kind in steps
        for judge in JUDGES
    )
    people = [
        user_create(username=f"annotator{i}", password=PASSWORD, role=Role.ANNOTATOR)
        for i in range(n_annotators)
    ]
    return audit_create(
        name="bench audit",
        run_ids=[run.pk],
        sample_size=n_trajectories,
        seed=2025,
        annotators=people,
        annotators_per_item=per_item,
    )


@dataclass
class Annotator:
    username: str
    port: int
    audit_id: int
    session: requests.Session | None = None
    save_ms: list[float] = field(default_factory=list)
    page_ms: list[float] = field(default_factory=list)
    sent: int = 0
    errors: list[str] = field(default_factory=list)

    def run(self) -> None:
        try:
            self._run()
        except Exception as exc:  # a thread's failure must reach the printed figures, not vanish
            self.errors.append(f"{self.username}: {exc!r}")

    def _run(self) -> None:
        base = f"http://127.0.0.1:{self.port}"
        session = self.session = requests.Session()
        session.get(f"{base}/accounts/login/", timeout=30)
        response = session.post(
            f"{base}/accounts/login/",
            data={
                "username": self.username,
                "password": PASSWORD,
                "csrfmiddlewaretoken": session.cookies["csrftoken"],
            },
            headers={"Referer": f"{base}/accounts/login/"},
            timeout=30,
        )
        if "sessionid" not in session.cookies:
            raise RuntimeError(f"login of {self.username} failed: {response.status_code}")
        rng = random.Random(self.username)
        url: str | None = f"{base}/audits/queue/{self.audit_id}/resume/"
        while url is not None:
            started = time.perf_counter()
            page = session.get(url, timeout=30)
            self.page_ms.append(1000 * (time.perf_counter() - started))
            if page.status_code != 200:
                raise RuntimeError(f"{url} answered {page.status_code}")
            item_path = page.url.removeprefix(base)
            for kind, step_id in STEP_PATTERN.findall(page.text):
                self._save(session, base, item_path, int(step_id), kind, rng)
            found = NEXT_PATTERN.search(page.text)
            url = f"{base}{found.group(1)}" if found else None

    def _save(
        self,
        session: requests.Session,
        base: str,
        item_path: str,
        step_id: int,
        kind: str,
        rng: random.Random,
    ) -> None:
        # Annotators agree on most steps: each step has a "truth" the annotator picks 85% of the time.
        choices = LABELS_BY_KIND[Step.Kind(kind)]
        truth = choices[random.Random(step_id).randrange(len(choices) - 1)]
        value = truth if rng.random() < 0.85 else rng.choice(choices)
        started = time.perf_counter()
        response = session.post(
            f"{base}{item_path}label/",
            data={"step": step_id, "label": value, "seconds_spent": rng.randrange(3, 40), "comment": ""},
            headers={
                "HX-Request": "true",
                "X-CSRFToken": session.cookies["csrftoken"],
                "Referer": base + item_path,
            },
            timeout=30,
        )
        self.save_ms.append(1000 * (time.perf_counter() - started))
        self.sent += 1
        if response.status_code != 200 or b"saved:" not in response.content:
            self.errors.append(f"step {step_id}: {response.status_code} {response.text[:200]}")


def percentiles(values: list[float]) -> tuple[float, float, float]:
    ms = sorted(values)
    return statistics.median(ms), ms[max(0, round(0.95 * len(ms)) - 1)], ms[-1]


@dataclass
class Serial:
    """One annotator re-labelling steps one after the other: the server's cost of a save without other clients."""

    save_ms: list[float]
    cpu_ms_per_save: float


def relabel_serially(audit: Audit, person: Annotator, server_pid: int, n: int) -> Serial:
    rows = list(
        Label.objects.filter(item__audit=audit, annotator__username=person.username)
        .order_by("item__position", "step__index")
        .values_list("item_id", "step_id", "step__kind")[:n]
    )
    connection.close()
    base = f"http://127.0.0.1:{person.port}"
    sent = person.sent
    rng = random.Random(1)
    cpu = tree_cpu_seconds(server_pid)
    for item_id, step_id, kind in rows:
        person._save(person.session, base, f"/audits/queue/items/{item_id}/", step_id, kind, rng)
    cpu = tree_cpu_seconds(server_pid) - cpu
    serial = Serial(person.save_ms[sent:], 1000 * cpu / len(rows))
    del person.save_ms[
        sent:
    ]  # the concurrent figures stay the concurrent phase's (errors are kept: they count)
    person.sent = sent  # re-labels replace labels: "sent" counts the labels that must be stored
    return serial


def bench_annotators(
    audit: Audit, n_annotators: int, workers: int
) -> tuple[list[Annotator], float, float, Serial]:
    port = free_port()
    env = {**os.environ, "DATABASE_URL": database_url_for(connection.settings_dict["NAME"]), "DEBUG": "0"}
    server = subprocess.Popen(
        [
            *(sys.executable, "-m", "gunicorn", "webapp.wsgi:application"),
            *("--bind", f"127.0.0.1:{port}", "--workers", str(workers), "--log-level", "warning"),
        ],
        cwd=ROOT,
        env=env,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if requests.get(f"http://127.0.0.1:{port}/accounts/login/", timeout=30).status_code == 200:
                    break
            except requests.RequestException:  # refused while booting, or slow to answer the first request
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                raise SystemExit("gunicorn did not start")
            time.sleep(0.2)
        for _ in range(workers * 4):  # every worker opens its database connection before the clock starts
            requests.get(f"http://127.0.0.1:{port}/accounts/login/", timeout=30)
        people = [Annotator(f"annotator{i}", port, audit.pk) for i in range(n_annotators)]
        threads = [threading.Thread(target=person.run) for person in people]
        cpu_before = tree_cpu_seconds(server.pid)
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - started
        server_cpu = tree_cpu_seconds(server.pid) - cpu_before
        serial = relabel_serially(audit, people[0], server.pid, 300)
    finally:
        server.terminate()
        server.wait(timeout=30)
    return people, wall, server_cpu, serial


def timed(action: Callable[[], T]) -> tuple[T, float]:
    """The action's result and its wall seconds."""
    started = time.perf_counter()
    result = action()
    return result, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trajectories", type=int, default=200)
    parser.add_argument("--annotators", type=int, default=3)
    parser.add_argument("--per-item", type=int, default=3)
    parser.add_argument("--workers", type=int, default=(os.cpu_count() or 1) + 1)
    args = parser.parse_args()

    original_name = connection.settings_dict["NAME"]
    test_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    print(f"database: {connection.vendor} {test_name} (created for the benchmark, dropped afterwards)")
    ok = False
    try:
        audit, seconds = timed(lambda: create_audit(args.trajectories, args.annotators, args.per_item))
        n_steps = Step.objects.filter(trajectory__audit_items__audit=audit).count()
        print(
            f"audit created in {seconds:.1f} s: {audit.items.count()} trajectories, {n_steps} steps, "
            f"{args.annotators} annotators, {args.per_item} per trajectory, judges {', '.join(JUDGES)}"
        )
        connection.close()  # the server's workers are the only users of the database while the clock runs
        people, wall, server_cpu, serial = bench_annotators(audit, args.annotators, args.workers)
        saves = [ms for person in people for ms in person.save_ms]
        pages = [ms for person in people for ms in person.page_ms]
        errors = [error for person in people for error in person.errors]
        sent = sum(person.sent for person in people)
        stored = Label.objects.filter(item__audit=audit, step__isnull=False).count()
        save_p50, save_p95, save_max = percentiles(saves)
        page_p50, page_p95, page_max = percentiles(pages)
        print(
            f"{args.annotators} annotators at once through gunicorn ({args.workers} sync workers), "
            f"{wall:.1f} s wall, {len(saves) / wall:.0f} saves/s, server CPU {1000 * server_cpu / len(saves):.1f} ms "
            f"per save (pages included)"
        )
        print(
            f"label save p50/p95 ms: {save_p50:.1f} / {save_p95:.1f} (max {save_max:.1f}; target p95 <= 50)"
        )
        print(
            f"next trajectory p95 ms: {page_p95:.1f} (p50 {page_p50:.1f}, max {page_max:.1f}; {len(pages)} pages)"
        )
        serial_p50, serial_p95, _ = percentiles(serial.save_ms)
        print(
            f"  one annotator alone, {len(serial.save_ms)} re-labels: p50/p95 {serial_p50:.1f} / {serial_p95:.1f} ms, "
            f"server CPU {serial.cpu_ms_per_save:.1f} ms per save (gunicorn; PostgreSQL not included)"
        )
        print(
            f"labels sent / stored: {sent} / {stored} (expected {n_steps * args.per_item}); errors: {len(errors)}"
        )
        for error in errors[:5]:
            print(f"  {error}")
        found, seconds = timed(lambda: report.audit_report(audit=Audit.objects.get(pk=audit.pk)))
        print(f"report computed in {seconds:.1f} s ({report.N_RESAMPLES} bootstrap resamples per statistic)")
        for section in found.sections:
            accuracy = section.agreement.percent_agreement
            print(
                f"  {section.detector.name} · {section.judge_model}: {section.agreement.n_items} steps compared, "
                f"accuracy {100 * (accuracy or 0):.1f}%, {section.n_no_consensus} without a human answer"
            )
        frozen, seconds = timed(
            lambda: audit_transition(audit=Audit.objects.get(pk=audit.pk), action="close")
        )
        print(f"closed (report frozen as #{frozen.pk}) in {seconds:.1f} s")
        body, seconds = timed(lambda: export.as_jsonl(Audit.objects.get(pk=audit.pk)))
        print(f"JSONL export: {body.count(chr(10))} lines, {len(body) / 1e6:.1f} MB in {seconds:.2f} s")
        ok = save_p95 <= 50 and sent == stored == n_steps * args.per_item and not errors
    finally:
        connection.close()
        connection.creation.destroy_test_db(original_name, verbosity=0)
    print("targets met" if ok else "a target was missed")


if __name__ == "__main__":
    main()
