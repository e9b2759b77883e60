"""Benchmark of replaying a detached run's spool (``manage.py replay_spool``): a first replay, then a second that
must store nothing; prints each one's time and counts.

The spool is written the way ``python -m trainer.report_client --spool-only`` writes it (trainer.spool's
SpoolWriter and manifest): ``--steps`` steps (500) of ``--keys`` metric keys (40) and ``--samples`` HiPRAG samples
per step (4), in batches of one step each (the client splits at 500 rows). It works in a SQLite database of its own
(a temporary file, created, migrated and dropped), so it never touches the data in DATABASE_URL or the test database.

    .venv/bin/python bench/spool_replay.py
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")

import django  # noqa: E402

django.setup()

from django.db import connection  # noqa: E402

from tests.webapp.training.fake_trainer import TEXT  # noqa: E402
from trainer import spool  # noqa: E402
from webapp.runs.models import MetricPoint  # noqa: E402
from webapp.training.spool_replay import spool_replay  # noqa: E402
from webapp.trajectories.models import Trajectory  # noqa: E402


def write_spool(folder: Path, steps: int, keys: int, samples: int) -> int:
    """A finished run's spool; the number of batch files."""
    config = {"method": "hiprag", "algorithm": "grpo", "model": {"path": "tiny-random"}}
    spool.write_manifest(folder, spool.manifest_for(config, name="bench spool", command=["bench"]))
    writer = spool.SpoolWriter(folder)
    start = 1.7e9
    for step in range(1, steps + 1):
        metrics = [
            {"step": step, "key": f"bench/key{k}", "value": (step * (k + 1) % 97) / 97, "time": start + step}
            for k in range(keys)
        ]
        rows = [
            {
                "key": f"{step}@{i}",
                "row": {
                    "step": step,
                    "question": f"q{i}",
                    "text": TEXT,
                    "reward": 0.5,
                    "step_rewards": [0.2, 0.3],
                },
            }
            for i in range(samples)
        ]
        final = "finished" if step == steps else None
        writer.submit({"metrics": metrics, "samples": rows, "progress": {"step": step}, "final": final})
    return len(spool.batch_files(folder))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--keys", type=int, default=40)
    parser.add_argument("--samples", type=int, default=4)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="spool-replay-bench-"))
    if connection.vendor == "sqlite":
        connection.settings_dict["TEST"]["NAME"] = str(folder / "bench.sqlite3")
    original_name = connection.settings_dict["NAME"]
    test_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    print(f"database: {connection.vendor} {test_name} (created for the benchmark, dropped afterwards)")
    try:
        files = write_spool(folder / "spool", args.steps, args.keys, args.samples)
        size = sum(p.stat().st_size for p in (folder / "spool").iterdir())
        print(
            f"spool: {files} batch files, {size / 1e6:.1f} MB ({args.steps} steps x {args.keys} keys, "
            f"{args.samples} samples a step)"
        )
        for label in ("first replay", "second replay"):
            started = time.perf_counter()
            result = spool_replay(folder / "spool")
            seconds = time.perf_counter() - started
            print(f"{label}: {seconds:.1f} s; {result.lines()[0]}")
        print(
            f"stored: {MetricPoint.objects.count():,} metric points, {Trajectory.objects.count():,} trajectories"
        )
    finally:
        connection.creation.destroy_test_db(original_name, verbosity=0)
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
