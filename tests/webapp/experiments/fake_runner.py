"""The stage runner itself (``trainer.jobs``: plan, stages, spool) run in a thread of the test, with scripted models:
each evaluation answers with a scripted policy against a keyword searcher, each trainer "trains" by writing a model
file and a run spool of one metric curve. The app launches it (as a local subprocess or a Ray job), follows its
spool and replays it as it would the real runner's."""

from __future__ import annotations

import datetime as dt
import json
import shlex
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from tests.agent.conftest import PASSAGES, KeywordSearcher, ScriptedBackend


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class ThreadRunner:
    """A runner's command executed in a thread (``poll``: 0 when its run ended well, 1 otherwise)."""

    def __init__(self, argv: list[str]) -> None:
        self.code: int | None = None
        self.where = "a test thread"
        self.thread = threading.Thread(target=self._run, args=(argv,), daemon=True)
        self.thread.start()

    def _run(self, argv: list[str]) -> None:
        from trainer.jobs.plan import parser, plan_from_args
        from trainer.jobs.runner import run_experiment

        try:
            self.code = run_experiment(plan_from_args(parser().parse_args(argv[4:])))
        except BaseException:  # an interrupted trainer: the runner recorded its spool failed
            self.code = 1

    def poll(self) -> int | None:
        return None if self.thread.is_alive() else self.code

    def stop(self) -> None:
        self.thread.join(timeout=30)


def scripted_evaluation(
    policy_for: Callable[[Any], Callable[[str], str]],
) -> Callable[..., list[dict[str, Any]]]:
    """trainer.jobs.evaluation.evaluate_model with the policy ``policy_for(stage)`` answering."""

    def evaluate_model(
        stage: Any, rows: list[dict[str, Any]], index: Path, budgets: dict[str, Any], judge: Any
    ) -> list[dict[str, Any]]:
        from dataclasses import replace

        from agent.evaluate import evaluate_sync
        from agent.judge_spec import build_judges
        from agent.rollout import PAPER_CONFIGS
        from agent.rollout_methods import METHODS
        from trainer.jobs.evaluation import questions_of, record_row

        backend = ScriptedBackend(policy_for(stage))
        config = replace(
            PAPER_CONFIGS[stage.method], **budgets, temperature=stage.temperature, seed=stage.seed
        )
        result = evaluate_sync(
            backend,
            KeywordSearcher(PASSAGES),
            stage.method,
            questions_of(rows),
            judges=build_judges(judge, backend),
            config=config,
            params=stage.params,
        )
        return [record_row(r, METHODS[stage.method].format) for r in result.records]

    return evaluate_model


def fake_launch(state: dict[str, Any]) -> Callable[[Any, float], None]:
    """A trainer that writes its model and a run spool of its steps; ``state["interrupt"]`` names a method whose
    training is interrupted once (KeyboardInterrupt), ``state["trained"]`` lists the stages trained, ``state["fail"]``
    a method whose trainer exits 1."""

    def launch(job: Any, max_seconds: float) -> None:
        state["trained"].append(job.key)
        if state.get("interrupt") == job.arm.method:
            state["interrupt"] = None
            raise KeyboardInterrupt
        code = 1 if state.get("fail") == job.arm.method else 0
        job.output_dir.mkdir(parents=True, exist_ok=True)
        (job.output_dir / "config.json").write_text("{}")
        (job.output_dir / "model.safetensors").write_text("")
        steps = int(job.config.training.max_steps)
        metrics = [
            {"step": step, "time": 1.0e9 + step, "key": key, "value": value}
            for step in range(1, steps + 1)
            for key, value in (("osr", 0.5 / step), ("searches/mean", 2.0 / step))
        ]
        job.stage.mkdir(parents=True, exist_ok=True)
        batch = {"metrics": metrics, "samples": [], "final": "finished" if code == 0 else "failed"}
        (job.stage / "000000000001.json").write_text(json.dumps(batch))
        manifest = {
            "format": "searchlab-spool",
            "version": 1,
            "id": str(uuid.uuid4()),
            "name": f"train · {job.arm.name} · seed {job.seed}",
            "method": job.arm.method,
            "algorithm": job.config.algorithm,
            "model_name": job.config.model.path,
            "config": job.config.to_dict(),
            "command": ["python", "-m", "trainer.train"],
            "host": "test",
            "started_at": _now(),
            "finished_at": _now(),
            "exit_code": code,
        }
        (job.stage / "manifest.json").write_text(json.dumps(manifest))
        job.process = SimpleNamespace(pid=0, returncode=code, poll=lambda: code)

    return launch


class FakeJobClient:
    """Ray's JobSubmissionClient as the app uses it: a submitted runner runs in a thread."""

    def __init__(self) -> None:
        self.jobs: dict[str, ThreadRunner] = {}
        self.submitted: list[dict[str, Any]] = []
        self.stopped: list[str] = []

    def submit_job(self, *, submission_id: str, entrypoint: str, **kwargs: Any) -> str:
        self.submitted.append({"submission_id": submission_id, "entrypoint": entrypoint, **kwargs})
        self.jobs[submission_id] = ThreadRunner(shlex.split(entrypoint.split("&&", 1)[1]))
        return submission_id

    def get_job_info(self, job_id: str) -> Any:
        code = self.jobs[job_id].poll()
        status = "RUNNING" if code is None else "SUCCEEDED" if code == 0 else "FAILED"
        return SimpleNamespace(status=status, driver_exit_code=code, message="")

    def get_job_logs(self, job_id: str) -> str:
        return ""

    def stop_job(self, job_id: str) -> bool:
        self.stopped.append(job_id)
        return True
