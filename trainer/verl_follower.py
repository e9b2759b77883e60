"""Follow a veRL run into searchlab while it trains: its rollout dumps and its metrics, over HTTP.

veRL (0.9.1) writes, with ``trainer.rollout_data_dir=DIR``, one ``DIR/<step>.jsonl`` per training step
(``RayPPOTrainer._write_generations``): a row per sample with ``input`` (the decoded prompt), ``output`` (the decoded
response), ``gts`` (``reward_model.ground_truth``), ``score`` (the sequence's reward), ``step``, and every key of the
reward function's ``reward_extra_info`` — with :mod:`trainer.verl_reward` that includes ``searchlab``, the parsed
steps, step rewards and verdicts the reward was computed from. With ``trainer.logger=['console','file']`` veRL's
``FileLogger`` appends ``{"step": N, "data": {metric: value}}`` lines to ``VERL_FILE_LOGGER_PATH``.

The follower turns both into searchlab's batches (:mod:`trainer.report_client`) and sends them to a run with its
ingest token; nothing in veRL changes::

    python -m trainer.verl_follower --url http://searchlab:8000 --run-id 42 \\
        --rollout-dir /ckpt/rollouts --metrics-file /ckpt/metrics.jsonl --spool /tmp/follow-42

Samples are keyed ``verl:<step>:<line>``, metrics are (step, key): replays and restarts store nothing twice. veRL
writes a step's file whole, in a background thread; a line without its newline yet is read on the next pass.
Metric names: veRL's own keys are kept as ``verl/<key>``, and the ones searchlab plots get searchlab's names
(:data:`METRIC_NAMES`); each step's dump also gives ``rollout/score_mean``, ``format_ok_rate``, ``searches/mean``
and ``accuracy`` (cover EM of the parsed answer).

A dump that holds messages: a row with a ``messages`` key (a list of OpenAI-style messages, or that list as JSON
text), as a reward function writes it into ``reward_extra_info`` from veRL's tool agent loop (whose assistant
messages carry ``tool_calls`` and whose ``tool`` messages the results), or with ``messages`` in its ``searchlab``
detail, is sent as a chat trajectory (``scoring.formats.chat``: each search call a search step, its result the
retrieved context) instead of the decoded ``output`` text; its question is the first user message when the row has
no ``question``.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import signal
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from trainer.report_client import TOKEN_ENV, Batch, ReportClient, read_new_lines

logger = logging.getLogger(__name__)

METRIC_NAMES = {
    "critic/score/mean": "reward/mean",
    "actor/entropy": "entropy",
    "actor/pg_loss": "loss",
    "actor/grad_norm": "grad_norm",
    "actor/kl_loss": "kl",
    "actor/lr": "learning_rate",
    "actor/pg_clipfrac": "clip_ratio",
    "response_length/mean": "completion_length",
    "timing_s/step": "step_time",
}


def _golds(value: Any) -> list[str]:
    if isinstance(value, Mapping):
        value = value.get("target", value.get("golden_answers"))
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value] if isinstance(value, list | tuple) else []


def _detail(row: Mapping[str, Any]) -> dict[str, Any]:
    raw = row.get("searchlab")
    if isinstance(raw, str):
        try:
            value = json.loads(raw)
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}
    return dict(raw) if isinstance(raw, Mapping) else {}


def _messages(row: Mapping[str, Any], detail: Mapping[str, Any]) -> Any:
    """The row's chat messages (a list, or a list as JSON text), or None when it holds none."""
    value = row.get("messages", detail.get("messages"))
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return value  # kept: parsed as chat, it is stored with the reason it is not JSON
    return value


def _chat_json(messages: Any) -> str:
    """The text a chat sample is sent as: the canonical message list, or what the row held when it is not one."""
    from scoring.formats.chat import chat_text

    if isinstance(messages, list):
        return chat_text(messages)
    return messages if isinstance(messages, str) else json.dumps(messages)


def sample_row(row: Mapping[str, Any], *, question_key: str = "question") -> dict[str, Any]:
    """A veRL dump row as a searchlab sample row (trainer.callbacks.sample_row's fields that ingest reads)."""
    from scoring.formats.chat import FORMAT_NAME, QUESTION_KEY, parse_chat_messages

    detail = _detail(row)
    score = row.get("score")
    messages = _messages(row, detail)
    chat: dict[str, Any] = {}
    if messages is not None:
        text = _chat_json(messages)
        question = (
            parse_chat_messages(messages).extras.get(QUESTION_KEY) if isinstance(messages, list) else None
        )
        chat = {"format": FORMAT_NAME, "text": text, "question": row.get(question_key) or question or ""}
    return {
        "step": row.get("step") if isinstance(row.get("step"), int) else None,
        "prompt": row.get("input"),
        "question": row.get(question_key) or row.get("input") or "",
        "question_id": row.get("question_id") or row.get("uid") or "",
        "golden_answers": _golds(row.get("gts")),
        "text": row.get("output") if isinstance(row.get("output"), str) else "",
        "reward": float(score) if isinstance(score, int | float) and math.isfinite(score) else None,
        "components": detail.get("components") or {},
        "step_rewards": detail.get("step_rewards") or None,
        "steps": detail.get("steps") or [],
        **chat,
    }


def dump_metrics(
    step: int, rows: Sequence[Mapping[str, Any]], method: str, now: float
) -> list[dict[str, Any]]:
    """Per-step behaviour metrics computed from the step's dumped samples."""
    from scoring.formats import CHAT_FORMAT, parse
    from scoring.metrics import cover_exact_match
    from scoring.scorer import METHODS

    if not rows:
        return []
    scores = [float(r["score"]) for r in rows if isinstance(r.get("score"), int | float)]
    parsed = [
        parse(CHAT_FORMAT, _chat_json(m))
        if (m := _messages(r, _detail(r))) is not None
        else parse(METHODS[method].format, str(r.get("output") or ""))
        for r in rows
    ]
    values = {
        "format_ok_rate": sum(t.valid for t in parsed) / len(parsed),
        "searches/mean": statistics.fmean(t.n_searches for t in parsed),
        "accuracy": statistics.fmean(
            float(t.answer is not None and cover_exact_match(t.answer, _golds(r.get("gts")) or [""]))
            for t, r in zip(parsed, rows, strict=True)
        ),
    }
    if scores:
        values["rollout/score_mean"] = statistics.fmean(scores)
    return [{"step": step, "key": k, "value": v, "time": now} for k, v in values.items()]


class VerlFollower:
    """Reads new dump lines and metric lines since the last :meth:`read` (offsets per file kept in memory; a
    restarted follower reads everything again, which ingest's keys make harmless)."""

    def __init__(
        self, rollout_dir: str | Path, *, method: str, metrics_file: str | Path | None = None
    ) -> None:
        self.rollout_dir = Path(rollout_dir)
        self.metrics_file = Path(metrics_file) if metrics_file else None
        self.method = method
        self.offsets: dict[str, int] = {}
        self.lines: dict[str, int] = {}
        self.metrics_offset = 0

    def read(self) -> Batch:
        samples: list[dict[str, Any]] = []
        metrics: list[dict[str, Any]] = []
        now = time.time()
        files = sorted(
            (p for p in self.rollout_dir.glob("*.jsonl") if p.stem.isdigit()), key=lambda p: int(p.stem)
        )
        for path in files:
            rows, offset = read_new_lines(path, self.offsets.get(path.name, 0))
            if offset < self.offsets.get(path.name, 0):
                continue
            self.offsets[path.name] = offset
            step = int(path.stem)
            first = self.lines.get(path.name, 0)
            for n, (_, row) in enumerate(rows, start=first):
                samples.append({"key": f"verl:{step}:{n}", "row": sample_row(row)})
            self.lines[path.name] = first + len(rows)
            if rows:
                metrics.extend(dump_metrics(step, [row for _, row in rows], self.method, now))
        if self.metrics_file is not None:
            rows, self.metrics_offset = read_new_lines(self.metrics_file, self.metrics_offset)
            for _, logged in rows:
                at, data = logged.get("step"), logged.get("data")
                if not isinstance(at, int) or not isinstance(data, Mapping):
                    continue
                for key, value in data.items():
                    if (
                        isinstance(value, int | float)
                        and not isinstance(value, bool)
                        and math.isfinite(value)
                    ):
                        metrics.append(
                            {"step": at, "key": f"verl/{key}"[:100], "value": float(value), "time": now}
                        )
                        if key in METRIC_NAMES:
                            metrics.append(
                                {"step": at, "key": METRIC_NAMES[key], "value": float(value), "time": now}
                            )
        return {"metrics": metrics, "samples": samples}


def follow(
    follower: VerlFollower,
    client: ReportClient,
    *,
    interval: float = 2.0,
    until: Any = None,
    final: str | None = None,
    drain_seconds: float = 120.0,
    stop_pid: int | None = None,
) -> None:
    """Read and send every ``interval`` seconds until ``until()`` is true (or SIGTERM/SIGINT), then drain.

    A researcher's Stop reaches the follower in the ingest answers (:attr:`ReportClient.stop_requested`). The veRL
    run is not the follower's own process, so the follower forwards it as SIGINT to ``stop_pid`` (veRL's driver, the
    process that runs ``main_ppo``) when one is given, once, and goes on following until the run ends; without
    ``stop_pid`` it logs that the stop has to be carried out by hand."""
    stop = {"now": False}
    stop_forwarded = False

    def handler(signum: int, frame: Any) -> None:
        stop["now"] = True

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        while True:
            done = stop["now"] or (until is not None and until())
            batch = follower.read()
            batch["heartbeat"] = True
            if done and final:
                batch["final"] = final
            client.submit(batch)
            client.flush()
            if client.stop_requested and not stop_forwarded:
                stop_forwarded = True
                forward_stop(stop_pid)
            if done:
                break
            time.sleep(interval)
        deadline = time.monotonic() + drain_seconds
        while not client.flush() and time.monotonic() < deadline:
            time.sleep(interval)
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def forward_stop(pid: int | None) -> bool:
    """SIGINT to veRL's driver (a cooperative stop: it ends its step and exits); False when there is none to stop."""
    if pid is None:
        logger.warning("searchlab asks this run to stop; pass --stop-pid (veRL's driver) to forward it")
        return False
    try:
        os.kill(pid, signal.SIGINT)
    except ProcessLookupError:
        logger.warning("searchlab asks this run to stop; process %s has already ended", pid)
        return False
    logger.info("searchlab asks this run to stop: SIGINT sent to veRL's driver (pid %s)", pid)
    return True


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m trainer.verl_follower", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--url", required=True)
    parser.add_argument("--run-id", type=int, required=True)
    parser.add_argument("--token-env", default=TOKEN_ENV)
    parser.add_argument("--rollout-dir", required=True, help="veRL's trainer.rollout_data_dir")
    parser.add_argument("--metrics-file", help="veRL's VERL_FILE_LOGGER_PATH (trainer.logger with 'file')")
    parser.add_argument("--method", default="search_r1", help="the trajectories' format (searchlab method)")
    parser.add_argument(
        "--spool", default="", help="the spool folder (default: <rollout-dir>/.searchlab-spool)"
    )
    parser.add_argument("--interval", type=float, default=2.0)
    parser.add_argument("--until-file", help="stop (and mark the run finished) once this file exists")
    parser.add_argument(
        "--stop-pid", type=int, help="veRL's driver process: a Stop pressed in searchlab sends it SIGINT"
    )
    args = parser.parse_args(argv)
    token = os.environ.get(args.token_env, "")
    if not token:
        parser.error(f"${args.token_env} is empty: the run's ingest token is required")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    follower = VerlFollower(args.rollout_dir, method=args.method, metrics_file=args.metrics_file)
    client = ReportClient(
        args.url, args.run_id, token, args.spool or Path(args.rollout_dir) / ".searchlab-spool"
    )
    until_file = Path(args.until_file) if args.until_file else None
    follow(
        follower,
        client,
        interval=args.interval,
        until=(lambda: until_file.exists()) if until_file else None,
        final="finished" if until_file else None,
        stop_pid=args.stop_pid,
    )
    print(json.dumps({"rows_sent": client.rows_submitted, "rows_acknowledged": client.rows_acknowledged}))
    return 0 if client.pending() == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
