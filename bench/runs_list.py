"""Benchmark of the runs list (``/``): the page with its headline numbers and trend lines against the same page
without them (the list as it was: status and trajectory count only); prints both medians and their ratio.

Data: ``--runs`` training runs (50), each with ``--steps`` logged steps (200) of ``--keys`` metric keys (30, the
trainer's usual count, four of them the headline keys) and 20 trajectories. It works in a SQLite database of its own
(a temporary file, created, migrated and dropped), so it never touches the data in DATABASE_URL or the test
database.

    .venv/bin/python bench/runs_list.py
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")

import django  # noqa: E402

django.setup()

from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402
from django.utils import timezone  # noqa: E402

from webapp.accounts.models import Role  # noqa: E402
from webapp.accounts.services import user_create  # noqa: E402
from webapp.runs import selectors  # noqa: E402
from webapp.runs.models import MetricPoint, Run  # noqa: E402
from webapp.trajectories.models import Trajectory  # noqa: E402


def populate(n_runs: int, n_steps: int, n_keys: int) -> int:
    now = timezone.now()
    keys = [*selectors.HEADLINE_KEYS.values()]
    keys += [f"bench/key{i}" for i in range(n_keys - len(keys))]
    n_points = 0
    for r in range(n_runs):
        run = Run.objects.create(
            name=f"bench run {r}", kind=Run.Kind.TRAIN, method="hiprag", algorithm="grpo", status="finished"
        )
        points = [
            MetricPoint(run=run, key=key, step=step, value=(step * (k + 1) % 97) / 97, wall_time=now)
            for step in range(1, n_steps + 1)
            for k, key in enumerate(keys)
        ]
        MetricPoint.objects.bulk_create(points, batch_size=5000)
        n_points += len(points)
        Trajectory.objects.bulk_create(
            Trajectory(run=run, question_text=f"q{i}", format="hiprag", raw_text="x", format_ok=True)
            for i in range(20)
        )
    return n_points


def median_ms(client: Client, repeats: int) -> tuple[float, int]:
    client.get("/")  # warm: templates compiled, connection open
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        response = client.get("/")
        times.append(time.perf_counter() - start)
        assert response.status_code == 200
    with CaptureQueriesContext(connection) as queries:
        client.get("/")
    return 1000 * statistics.median(times), len(queries)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--keys", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="runs-list-bench-")
    if connection.vendor == "sqlite":
        connection.settings_dict["TEST"]["NAME"] = str(Path(folder) / "bench.sqlite3")
    original_name = connection.settings_dict["NAME"]
    test_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    print(f"database: {connection.vendor} {test_name} (created for the benchmark, dropped afterwards)")
    try:
        n_points = populate(args.runs, args.steps, args.keys)
        print(f"{args.runs} runs, {n_points:,} metric points ({args.steps} steps x {args.keys} keys each)")
        client = Client()
        client.force_login(user_create(username="bench", password=None, role=Role.RESEARCHER))
        with mock.patch.object(selectors, "run_headlines", return_value={}):
            before, before_queries = median_ms(client, args.repeats)
        after, after_queries = median_ms(client, args.repeats)
        page = client.get("/").content.decode()
        print(
            f"without headline numbers: {before:.1f} ms median over {args.repeats} ({before_queries} queries)"
        )
        print(
            f"with numbers and trend lines: {after:.1f} ms median over {args.repeats} ({after_queries} queries, "
            f"{page.count('<polyline')} trend lines)"
        )
        print(f"ratio with/without: {after / before:.2f}")
    finally:
        connection.creation.destroy_test_db(original_name, verbosity=0)


if __name__ == "__main__":
    main()
