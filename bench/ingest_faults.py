"""Fault injection on the reporting path: the real ``trainer.report_client.ReportClient``, through its spool, against
searchlab's ingest endpoint served over HTTP, with batches mixing valid rows and every bad case of issue 32 plus a
5-minute outage of the web app (a fake clock: no real wait). Prints rows written, sent, stored, duplicate, refused
(with reasons) and lost; target: lost 0, every valid row stored once.

It works in a database of its own (Django's test database: created, migrated, dropped at the end):

    .venv/bin/python bench/ingest_faults.py

The scenario (:func:`fault_scenario`) is also run by tests/webapp/training/test_ingest_faults.py.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")

import django  # noqa: E402

django.setup()

from trainer.placement import CONFIG_KEY, Placement  # noqa: E402
from trainer.report_client import ReportClient  # noqa: E402

TEXT = (
    "<think>\n<step>\n    <reasoning>Look up.</reasoning>\n    <search>capital of France</search>\n"
    "    <context>Doc 1(Title: Paris) Paris is the capital of France.</context>\n"
    "    <conclusion>It says Paris.</conclusion>\n</step>\n<step>\n    <reasoning>I know it.</reasoning>\n"
    "    <conclusion>It is Paris.</conclusion>\n</step>\n</think>\n<answer>Paris</answer>"
)
KEYS = ("reward/mean", "search/over_rate", "search/under_rate")
OUTAGE_MINUTES = 5
T0 = 1_780_000_000.0  # a wall time for the rows (2026)


def sample_row(step: int, **changes: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "step": step,
        "question": "What is the capital of France?",
        "question_id": "q-paris",
        "golden_answers": ["Paris"],
        "text": TEXT,
        "reward": 0.7,
        "components": {"format": 1.0},
        "step_rewards": [0.2, 0.5],
        "steps": [
            {"index": 0, "verdicts": [{"detector": "over_search", "outcome": "true"}]},
            {"index": 1, "verdicts": [{"detector": "under_search", "outcome": "false"}]},
        ],
    }
    row.update(changes)
    return row


def metric(step: int, key: Any, **changes: Any) -> dict[str, Any]:
    return {"step": step, "key": key, "value": 0.1 * step, "time": T0 + step, **changes}


def bad(key: str, **changes: Any) -> dict[str, Any]:
    """A metric row of step 1 with ``changes`` (its step, time or value made bad)."""
    return {**metric(1, key), **changes}


# Every bad case: (what it is, the row, the field searchlab or the client names). Metric rows first.
BAD_METRICS: list[tuple[str, Any, str]] = [
    ("step 2**63", bad("bad/a", step=2**63), "step"),
    ("step 10**20", bad("bad/b", step=10**20), "step"),
    ("step as a string", bad("bad/c", step="3"), "step"),
    ("negative step", bad("bad/d", step=-1), "step"),
    ("time 1e20", bad("bad/e", time=1e20), "time"),
    ("time -1e13", bad("bad/f", time=-1e13), "time"),
    ('time "nan"', bad("bad/g", time="nan"), "time"),
    ("value NaN", bad("bad/h", value=float("nan")), "value"),
    ("value inf", bad("bad/i", value=float("inf")), "value"),
    ("value 10**400", bad("bad/j", value=10**400), "value"),
    ("value as a string", bad("bad/k", value="0.5"), "value"),
    ("value true", bad("bad/l", value=True), "value"),
    ("key a number", metric(1, 7), "key"),
    ("key missing", {"step": 1, "value": 1.0, "time": T0}, "key"),
    ("row not an object", "reward=1", ""),
]
BAD_SAMPLES: list[tuple[str, Any, str]] = [
    (
        "verdicts holding a string",
        {"key": "bad-verdict", "row": sample_row(1, steps=[{"index": 0, "verdicts": ["true"]}])},
        "row.steps[0].verdicts[0]",
    ),
    ("reward a string", {"key": "bad-reward", "row": sample_row(1, reward="high")}, "row.reward"),
    ("reward NaN", {"key": "bad-reward-nan", "row": sample_row(1, reward=float("nan"))}, "row.reward"),
    ("reward 10**400", {"key": "bad-reward-big", "row": sample_row(1, reward=10**400)}, "row.reward"),
    (
        "step reward a string",
        {"key": "bad-step-rewards", "row": sample_row(1, step_rewards=[0.1, "x"])},
        "row.step_rewards[1]",
    ),
    (
        "component inf",
        {"key": "bad-component", "row": sample_row(1, components={"format": float("inf")})},
        "row.components.format",
    ),
    ("text a number", {"key": "bad-text", "row": sample_row(1, text=5)}, "row.text"),
    ("sample step 2**63", {"key": "bad-step", "row": sample_row(2**63)}, "row.step"),
    (
        "unknown detector",
        {
            "key": "bad-detector",
            "row": sample_row(1, steps=[{"index": 0, "verdicts": [{"detector": "x", "outcome": "true"}]}]),
        },
        "row.steps[0].verdicts[0].detector",
    ),
    (
        "verdict on a step the text lacks",
        {
            "key": "bad-index",
            "row": sample_row(
                1, steps=[{"index": 9, "verdicts": [{"detector": "over_search", "outcome": "true"}]}]
            ),
        },
        "row.steps[0].index",
    ),
    ("row not an object", {"key": "bad-row", "row": "text"}, "row"),
    ("key missing", {"row": sample_row(1)}, "key"),
    ("sample not an object", ["key", "row"], ""),
]


@dataclass
class Figures:
    written: int = 0  # rows handed to the client
    sent: int = 0  # rows spooled and sent (bad values too: searchlab judges them)
    stored: int = 0  # rows in the database: metric points and trajectories
    duplicate: int = 0  # rows searchlab answered as stored before (the replayed batch)
    refused: int = 0  # rows in the dead-letter file, with their reasons
    pending: int = 0  # rows still spooled at the end
    valid: int = 0  # distinct valid rows written
    reasons: dict[str, int] = field(default_factory=dict)
    quiet: str = ""  # the run page's word after the outage
    crashed_during_outage: bool = False
    unreachable_seconds: float = 0.0
    failed_requests: int = 0
    final_status: str = ""
    kept_first_value: bool = False
    corrected_resend_stored: bool = False

    @property
    def lost(self) -> int:
        return self.written - self.stored - self.duplicate - self.refused - self.pending

    def lines(self) -> list[str]:
        out = [
            f"rows written {self.written}, sent {self.sent}, stored {self.stored} (valid {self.valid}), "
            f"duplicate {self.duplicate}, refused {self.refused}, pending {self.pending}, lost {self.lost}",
            f"outage: {OUTAGE_MINUTES} min (fake clock), {self.failed_requests} failed requests, client saw "
            f"{self.unreachable_seconds:.0f} s unreachable; run page: {self.quiet or '-'}; marked crashed: "
            f"{self.crashed_during_outage}; final status: {self.final_status}",
            f"a replay kept the first value: {self.kept_first_value}; the corrected resend of a refused sample "
            f"stored: {self.corrected_resend_stored}",
            "refused, by field and reason:",
        ]
        out += [f"  {count:3d}  {reason}" for reason, count in sorted(self.reasons.items())]
        return out


def fault_scenario(
    url: str, run_id: int, token: str, workdir: Path, *, down: Callable[[], None], up: Callable[[], None]
) -> Figures:
    """Send the batches through a real ReportClient to ``url`` (the server behind ``down``/``up``); the figures."""
    import datetime as dt

    from webapp.runs.models import MetricPoint, Run
    from webapp.training import reporting
    from webapp.training.models import IngestedSample
    from webapp.training.services import training_mark_crashed
    from webapp.trajectories.models import Trajectory

    now = [1000.0]

    def advance(seconds: float) -> None:
        now[0] += seconds

    client = ReportClient(
        url, run_id, token, workdir / "spool", clock=lambda: now[0], sleep=advance, retries=3
    )
    figures = Figures()
    valid_metrics: set[tuple[int, str]] = set()
    valid_samples: set[str] = set()

    def submit(batch: dict[str, Any], *, valid_m: int, valid_s: list[str]) -> None:
        figures.written += len(batch.get("metrics") or ()) + len(batch.get("samples") or ())
        valid_metrics.update((row["step"], row["key"]) for row in (batch.get("metrics") or ())[:valid_m])
        valid_samples.update(valid_s)
        client.submit(batch)

    # 1. Before the outage: valid rows of steps 1-2 mixed with every bad case, and a 200 KB log tail.
    good = [metric(step, key) for step in (1, 2) for key in KEYS]
    samples = [{"key": f"s{i}", "row": sample_row(1 + i % 2)} for i in range(4)]
    submit(
        {
            "metrics": good + [row for _, row, _ in BAD_METRICS],
            "samples": samples + [sample for _, sample, _ in BAD_SAMPLES],
            "progress": {"phase": "rollout", "step": 2, "max_steps": 10},
            "log_tail": "\n".join(f"line {i} " + "x" * 100 for i in range(2000)),
            "heartbeat": True,
        },
        valid_m=len(good),
        valid_s=[s["key"] for s in samples],
    )
    assert client.flush()
    first_at = Run.objects.values_list("heartbeat_at", flat=True).get(pk=run_id)

    # 2. The web app down for OUTAGE_MINUTES: a batch a minute spools (steps 3-7, a replay of step 1 with other
    # values, the corrected resend of the sample refused for its verdicts).
    down()
    for minute in range(OUTAGE_MINUTES):
        step = 3 + minute
        rows = [metric(step, key) for key in KEYS]
        batch: dict[str, Any] = {
            "metrics": rows,
            "samples": [{"key": f"s{4 + minute}", "row": sample_row(step)}],
            "heartbeat": True,
        }
        keys = [f"s{4 + minute}"]
        if minute == 1:
            batch["metrics"] = [*rows, dict(metric(1, KEYS[0]), value=99.0)]  # a replay: never overwrites
        if minute == 2:
            batch["samples"].append({"key": "bad-verdict", "row": sample_row(1)})
            keys.append("bad-verdict")
        submit(batch, valid_m=len(rows), valid_s=keys)
        assert not client.flush()
        advance(60.0)
    later = first_at + dt.timedelta(minutes=OUTAGE_MINUTES)
    run = Run.objects.get(pk=run_id)
    quiet = reporting.quiet_seconds(run, now=later)
    figures.quiet = f"quiet for {reporting.duration(quiet)}" if quiet is not None else ""
    figures.crashed_during_outage = bool(training_mark_crashed(run_id=run_id, now=later))

    # 3. Back up: the spool replays in order; the trainer's final status.
    up()
    client.submit({"metrics": [metric(8, key) for key in KEYS], "final": "finished", "heartbeat": True})
    figures.written += len(KEYS)
    valid_metrics.update((8, key) for key in KEYS)
    assert client.flush()

    figures.sent = client.rows_submitted
    figures.stored = (
        MetricPoint.objects.filter(run_id=run_id).count() + Trajectory.objects.filter(run_id=run_id).count()
    )
    figures.duplicate = client.rows_duplicate
    figures.pending = client.pending_rows()
    figures.valid = len(valid_metrics) + len(valid_samples)
    figures.unreachable_seconds = client.unreachable_seconds
    figures.failed_requests = client.failed_requests
    letters = [json.loads(line) for line in client.dead_letter.read_text(encoding="utf-8").splitlines()]
    rows_letters = [entry for entry in letters if entry["kind"] in ("metrics", "samples")]
    figures.refused = len(rows_letters)
    for entry in rows_letters:
        reason = f"{entry['kind']}.{entry['field'] or '(row)'}: {str(entry['reason'])[:70]}"
        figures.reasons[reason] = figures.reasons.get(reason, 0) + 1
    figures.final_status = Run.objects.values_list("status", flat=True).get(pk=run_id)
    figures.kept_first_value = MetricPoint.objects.get(run_id=run_id, step=1, key=KEYS[0]).value == 0.1
    figures.corrected_resend_stored = IngestedSample.objects.filter(run_id=run_id, key="bad-verdict").exists()
    return figures


class _Server:
    """searchlab's WSGI app on a thread, which can be taken down (connection refused) and brought back."""

    def __init__(self) -> None:
        import socket

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = int(sock.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self._server: Any = None

    def start(self) -> None:
        from socketserver import ThreadingMixIn
        from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

        from django.core.wsgi import get_wsgi_application
        from django.db import connections

        class Server(ThreadingMixIn, WSGIServer):
            daemon_threads = True
            allow_reuse_address = True

        class Quiet(WSGIRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                pass

        django_app = get_wsgi_application()

        def app(environ: Any, start_response: Any) -> Any:
            try:
                return django_app(environ, start_response)
            finally:
                connections.close_all()

        self._server = make_server("127.0.0.1", self.port, app, server_class=Server, handler_class=Quiet)
        threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def main() -> None:
    import logging

    from django.conf import settings
    from django.db import connection

    from webapp.runs.models import Run
    from webapp.runs.services import run_create, run_mark_started
    from webapp.training import ingest

    logging.disable(logging.WARNING)  # every refused row is logged; the figures below say it once
    settings.ALLOWED_HOSTS = ["127.0.0.1"]
    original_name = connection.settings_dict["NAME"]
    test_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    print(f"database: {connection.vendor} {test_name} (created for the benchmark, dropped afterwards)")
    server = _Server()
    try:
        run = run_create(
            name="faults",
            method="hiprag",
            model_name="tiny-random",
            kind=Run.Kind.TRAIN,
            algorithm="grpo",
            config={CONFIG_KEY: Placement.EXTERNAL.value},
        )
        run_mark_started(run_id=run.pk)
        server.start()
        with tempfile.TemporaryDirectory() as folder:
            figures = fault_scenario(
                server.url,
                run.pk,
                ingest.ingest_token(run.pk),
                Path(folder),
                down=server.stop,
                up=server.start,
            )
        for line in figures.lines():
            print(line)
        print(
            "target met: lost 0, every valid row stored once"
            if figures.lost == 0 and figures.stored == figures.valid
            else "TARGET MISSED"
        )
    finally:
        server.stop()
        connection.creation.destroy_test_db(original_name, verbosity=0)


if __name__ == "__main__":
    main()
