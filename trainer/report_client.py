"""Trainers report to searchlab over HTTP: metrics, samples, the heartbeat and the log tail, nothing lost or doubled.

Standard library only (no Django, no torch): a trainer on a GPU node, inside a Ray job or beside a veRL run imports
this and nothing else of the web app. Three parts, each in its module (this one re-exports the first two's names):

* :class:`OutputTailer` (:mod:`trainer.output_tailer`) reads what a trainer writes (``metrics.jsonl``,
  ``samples.jsonl``, ``progress.json``, its log) and turns the new part into one *batch*; the web app's local
  supervisor reads a run's files with the same class, so there is one ingest path.
* :class:`ReportClient` (:mod:`trainer.ingest_client`) spools each batch on local disk, sends it to
  ``POST /api/v1/runs/<id>/ingest/`` with the run's own token, retries, and keeps every row searchlab does not store
  in a dead-letter file; the answer's ``stop`` (a researcher pressed Stop) is :attr:`ReportClient.stop_requested`.
* The wrapper here, ``python -m trainer.report_client --url … --run-id … --output-dir … -- COMMAND…``, runs a
  trainer as its child, copies its output to a log file (and to its own stdout, which a Ray job keeps), tails its
  files and reports them until the child exits and every batch is acknowledged (or ``--drain-seconds`` pass); a
  Stop becomes the trainer's cooperative stop; exit status: the child's. With ``--spool-only --spool DIR --config
  CONFIG`` (a machine without searchlab) it sends nothing: the batches stay in ``DIR`` with a manifest of the run,
  and ``manage.py replay_spool DIR`` brings them in (:mod:`trainer.spool`).

Idempotency is the server's: a metric is one row per (run, step, key) (a replay overwrites it with the same value)
and a sample carries a ``key`` unique within its run (``<step>@<byte offset in samples.jsonl>`` here; veRL's
follower uses ``verl:<step>:<line>``), stored once whatever how often it arrives. So a batch sent twice (searchlab
stored it but the answer was lost) is harmless, and "at least once" sending gives "exactly once" rows.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from trainer.ingest_client import (
    DEAD_LETTER_SUFFIX,
    INGEST_PATH,
    MAX_DEPTH,
    POISON_TRIES,
    TOKEN_ENV,
    IngestRejected,
    ReportClient,
    Sender,
    ServerError,
    json_safe,
)
from trainer.output_tailer import (
    EXTRA_KEYS,
    LOG_TAIL_LINES,
    MAX_BATCH_BYTES,
    MAX_BATCH_ROWS,
    MAX_STEP,
    METRICS_FILE,
    PROGRESS_FILE,
    SAMPLES_FILE,
    Batch,
    OutputTailer,
    batch_rows,
    check_metric_row,
    is_noise,
    log_tail,
    metric_rows,
    read_new_lines,
    read_progress,
    sample_key,
    split_batch,
    split_metric_rows,
    tail_text,
)

__all__ = [
    "DEAD_LETTER_SUFFIX",
    "EXTRA_KEYS",
    "INGEST_PATH",
    "LOG_TAIL_LINES",
    "MAX_BATCH_BYTES",
    "MAX_BATCH_ROWS",
    "MAX_DEPTH",
    "MAX_STEP",
    "METRICS_FILE",
    "POISON_TRIES",
    "PROGRESS_FILE",
    "SAMPLES_FILE",
    "TOKEN_ENV",
    "Batch",
    "IngestRejected",
    "OutputTailer",
    "ReportClient",
    "Sender",
    "ServerError",
    "batch_rows",
    "check_metric_row",
    "is_noise",
    "json_safe",
    "log_tail",
    "main",
    "metric_rows",
    "read_new_lines",
    "read_progress",
    "report_while_running",
    "sample_key",
    "split_batch",
    "split_metric_rows",
    "tail_text",
    "write_files_from_env",
]

logger = logging.getLogger(__name__)


# --- the wrapper: a trainer as a child process, reported while it runs -------------------------------------------


def _copy_output(stream: Any, log_path: Path, echo: bool) -> None:
    with log_path.open("ab") as log:
        for chunk in iter(lambda: stream.read1(65536), b""):
            log.write(chunk)
            log.flush()
            if echo:
                sys.stdout.buffer.write(chunk)
                sys.stdout.buffer.flush()


def _hear_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@contextlib.contextmanager
def _forward_stop(child: subprocess.Popen[bytes]) -> Iterator[list[float]]:
    """SIGTERM/SIGINT to the wrapper (a Ray job stop, Ctrl-C) become SIGINT to the child's group: the trainer's
    cooperative stop (trainer.stop), its files flushed; the wrapper keeps reporting until the child exits."""
    stops: list[float] = []
    # Ray's job stop signals every process of the job (RAY_JOB_STOP_SIGNAL=SIGINT): the trainer already has its
    # SIGINT then, and a second one could interrupt its unwinding.
    reaches_child = os.environ.get("SEARCHLAB_STOP_REACHES_CHILD") == "1"

    def handler(signum: int, frame: Any) -> None:
        stops.append(time.monotonic())
        if signum == signal.SIGINT and reaches_child:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(child.pid, signal.SIGINT)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield stops
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def write_files_from_env(run_dir: Path) -> None:
    """A Ray job gets its run's files in its runtime environment (no shared disk with the web app needed):
    ``SEARCHLAB_RUN_CONFIG`` → config.json, ``SEARCHLAB_RUN_QUESTIONS`` → questions.jsonl."""
    run_dir.mkdir(parents=True, exist_ok=True)
    for variable, name in (
        ("SEARCHLAB_RUN_CONFIG", "config.json"),
        ("SEARCHLAB_RUN_QUESTIONS", "questions.jsonl"),
    ):
        value = os.environ.get(variable)
        if value:
            (run_dir / name).write_text(value, encoding="utf-8")


def report_while_running(
    command: Sequence[str],
    client: ReportClient,
    tailer: OutputTailer,
    *,
    log_path: Path,
    interval: float = 1.0,
    drain_seconds: float = 300.0,
    heartbeat_seconds: float = 10.0,
    echo: bool = True,
) -> int:
    """Run ``command``, report its output every ``interval`` seconds, drain the spool after it exits; its exit code."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    child = subprocess.Popen(
        list(command),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=_hear_sigint,
    )
    assert child.stdout is not None
    copier = threading.Thread(target=_copy_output, args=(child.stdout, log_path, echo), daemon=True)
    copier.start()
    beat_at = 0.0
    stop_sent = False
    with _forward_stop(child):
        exit_code: int | None = None
        while exit_code is None:
            try:
                exit_code = child.wait(timeout=interval)
            except subprocess.TimeoutExpired:
                exit_code = None
            if exit_code is not None:
                copier.join(timeout=5)
            batch = tailer.read()
            if time.monotonic() - beat_at >= heartbeat_seconds:
                batch["heartbeat"] = (
                    True  # a long step writes nothing: searchlab still hears the trainer is alive
                )
            if exit_code is not None:
                # The run's end as the trainer saw it: searchlab ends an external run with it (cancelled after a
                # Stop); a run searchlab supervises (a Ray job) takes its status from its supervisor instead.
                batch["final"] = "finished" if exit_code == 0 else "failed"
                if exit_code != 0:
                    batch["error"] = f"trainer exited with {exit_code}"
            if batch_rows(batch) or any(batch.get(k) is not None for k in EXTRA_KEYS):
                beat_at = time.monotonic()
            client.submit(batch)
            client.flush()
            if client.stop_requested and not stop_sent and exit_code is None:
                # A researcher pressed Stop (the ingest answer said ``stop``): the trainer's cooperative stop.
                logger.info("report client: stop requested by searchlab, SIGINT to the trainer")
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(child.pid, signal.SIGINT)
                stop_sent = True
        deadline = time.monotonic() + drain_seconds
        while not client.flush() and time.monotonic() < deadline:
            time.sleep(min(interval, max(0.0, deadline - time.monotonic())))
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(child.pid, signal.SIGKILL)  # what the trainer left behind
    summary = {**client.summary(), "exit_code": exit_code}
    if summary["batches_pending"]:
        logger.error(
            "report client: %d batch(es) still spooled in %s (resent by the next client on this spool)",
            summary["batches_pending"],
            client.spool,
        )
    print("searchlab report: " + json.dumps(summary), flush=True)
    return exit_code if exit_code >= 0 else 128 - exit_code  # killed by signal N: 128 + N, as a shell says


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m trainer.report_client",
        description="Run a trainer and report its metrics, samples, heartbeat and log to searchlab over HTTP, "
        "or (--spool-only, on a machine without searchlab) to a spool folder that manage.py replay_spool replays.",
    )
    parser.add_argument("--url", help="searchlab's base URL, e.g. http://web:8000")
    parser.add_argument("--run-id", type=int)
    parser.add_argument("--token-env", default=TOKEN_ENV, help="the variable holding the run's ingest token")
    parser.add_argument("--run-dir", help="config.json, trainer.log and the spool go here")
    parser.add_argument("--output-dir", required=True, help="the trainer's output_dir (metrics.jsonl, …)")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between reports")
    parser.add_argument(
        "--drain-seconds", type=float, default=300.0, help="how long to replay after the exit"
    )
    parser.add_argument(
        "--files-from-env", action="store_true", help="write config.json/questions.jsonl first"
    )
    detached = parser.add_argument_group("a machine without searchlab (trainer.spool)")
    detached.add_argument(
        "--spool-only", action="store_true", help="send nothing: every batch stays in --spool"
    )
    detached.add_argument("--spool", help="the spool folder (manifest.json, the batches, trainer.log)")
    detached.add_argument("--config", help="the trainer's config JSON, recorded in the manifest")
    detached.add_argument(
        "--name", default="", help="the run's name in searchlab (default: the spool's name)"
    )
    detached.add_argument("--method", default="", help="default: the config's method")
    detached.add_argument("--algorithm", default="", help="default: the config's algorithm")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the trainer's argv")
    return parser


def _main_detached(parser: argparse.ArgumentParser, args: argparse.Namespace, command: Sequence[str]) -> int:
    """``--spool-only``: run the trainer on a machine without searchlab, every batch kept in ``--spool``."""
    from trainer import spool

    if not args.spool or not args.config:
        parser.error("--spool-only needs --spool DIR and --config (the trainer's config JSON)")
    try:
        config = spool.read_json_object(Path(args.config), args.config)
    except spool.SpoolFileError as exc:
        parser.error(f"--config: {exc}")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    return spool.run_detached(
        command,
        args.spool,
        config,
        args.output_dir,
        interval=args.interval,
        **{key: getattr(args, key) for key in ("name", "method", "algorithm")},
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("the trainer's command is required after --")
    if args.spool_only:
        return _main_detached(parser, args, command)
    for option in ("url", "run_id", "run_dir"):
        if getattr(args, option) is None:
            parser.error(f"--{option.replace('_', '-')} is required (or --spool-only)")
    token = os.environ.get(args.token_env, "")
    if not token:
        parser.error(f"${args.token_env} is empty: the run's ingest token is required")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    run_dir = Path(args.run_dir)
    if args.files_from_env:
        write_files_from_env(run_dir)
    log_path = run_dir / "trainer.log"
    client = ReportClient(args.url, args.run_id, token, run_dir / "spool")
    tailer = OutputTailer(args.output_dir, log_path=log_path)
    return report_while_running(
        command,
        client,
        tailer,
        log_path=log_path,
        interval=args.interval,
        drain_seconds=args.drain_seconds,
    )


if __name__ == "__main__":
    sys.exit(main())
