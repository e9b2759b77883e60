"""The experiment spool's writer (ids kept on resume, stage status, atomic files), a trained stage's timing.csv and
the GPU memory arithmetic."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainer.jobs.spool import (
    ExperimentSpool,
    clear_run_spool,
    end_evaluation,
    evaluation_manifest,
    read_json,
    write_json,
)
from trainer.jobs.timing import GIB, estimated_gib, fitting_concurrency, gpu_concurrency, write_timing


def test_a_resumed_spool_keeps_its_id_and_phase_times(tmp_path: Path) -> None:
    first = ExperimentSpool(tmp_path, {"name": "x"})
    first.add_phase("training", 12.0)
    first.finish("failed", "cut short")
    again = ExperimentSpool(tmp_path, {"name": "x"})
    manifest = read_json(tmp_path / "manifest.json")
    assert manifest is not None
    assert manifest["id"] == first.manifest["id"] and manifest["status"] == "running"
    assert manifest["phases"]["training"] == 12.0 and manifest["started_at"] == first.manifest["started_at"]
    again.add_phase("training", 3.0)
    assert read_json(tmp_path / "manifest.json")["phases"]["training"] == 15.0  # type: ignore[index]
    assert not list(tmp_path.rglob("*.partial"))


def test_a_stage_is_finished_by_its_manifest(tmp_path: Path) -> None:
    spool = ExperimentSpool(tmp_path, {})
    manifest = evaluation_manifest(role="eval", method="hiprag", model="m", temperature=0.0, questions=3)
    write_json(spool.stage("eval-a-s0") / "manifest.json", manifest)
    assert not spool.stage_finished("eval-a-s0")
    end_evaluation(spool.stage("eval-a-s0"), manifest, seconds=1.25)
    ended = read_json(spool.stage("eval-a-s0") / "manifest.json")
    assert ended is not None and ended["status"] == "finished" and ended["seconds"] == 1.2
    run = spool.stage("train-a-s0")
    write_json(run / "manifest.json", {"format": "searchlab-spool", "id": "r", "exit_code": 1})
    assert not spool.stage_finished("train-a-s0")
    write_json(run / "manifest.json", {"format": "searchlab-spool", "id": "r", "exit_code": 0})
    assert spool.stage_finished("train-a-s0")


def test_a_rerun_training_stage_keeps_its_manifest_only(tmp_path: Path) -> None:
    for name in ("manifest.json", "000000000001.json", "trainer.log", "dead-letter.jsonl", "timing.csv"):
        (tmp_path / name).write_text("{}")
    clear_run_spool(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["manifest.json"]


def test_timing_has_each_steps_wall_time_and_its_phases(tmp_path: Path) -> None:
    output, stage = tmp_path / "out", tmp_path / "stage"
    output.mkdir()
    stage.mkdir()
    metrics = [{"step": s, "key": "step_time", "value": v, "time": 0} for s, v in ((1, 9.0), (2, 5.5))]
    (output / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in metrics))
    heartbeats = [
        {"step": 1, "phase_seconds": {"load": 4.0, "generate": 1.0}},
        {"step": 1, "phase_seconds": {"load": 4.0, "generate": 3.0, "update": 2.0}},
        {"step": 2, "phase_seconds": {"load": 4.0, "generate": 6.5, "update": 4.0}},
    ]
    for number, progress in enumerate(heartbeats, 1):
        (stage / f"{number:012d}.json").write_text(json.dumps({"metrics": [], "progress": progress}))
    assert write_timing(stage, output) == 2
    lines = (stage / "timing.csv").read_text().splitlines()
    assert lines[0].startswith("step,step_seconds,load_seconds,generate_seconds,retrieve_seconds")
    assert lines[1] == "1,9.00,4.00,3.00,0.00,0.00,2.00,0.00"
    assert lines[2] == "2,5.50,0.00,3.50,0.00,0.00,2.00,0.00"


def test_fewer_trainers_run_at_once_when_the_gpu_memory_would_not_hold_them(tmp_path: Path) -> None:
    assert fitting_concurrency(6, 10.0, int(80 * GIB)) == 6
    assert fitting_concurrency(6, 20.0, int(80 * GIB)) == 3  # 90% of 80 GiB holds 3 of 20
    assert fitting_concurrency(6, 100.0, int(80 * GIB)) == 1  # never none
    (tmp_path / "config.json").write_text(json.dumps({"torch_dtype": "bfloat16"}))
    (tmp_path / "model.safetensors").write_bytes(b"\0" * 2_000_000)  # a million parameters in bf16
    assert estimated_gib(tmp_path) == 1_000_000 * 16 * 1.5 / GIB + 1.5


def test_on_cuda_the_free_memory_decides_and_is_logged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda: (int(40 * GIB), int(80 * GIB)))
    said: list[str] = []
    assert gpu_concurrency(6, 10.0, tmp_path, said.append) == 3  # 90% of 40 GiB holds 3 of 10
    assert (
        gpu_concurrency(6, 10.0, tmp_path, said.append, evaluating=True) == 2
    )  # 30 GiB after the evaluation's
    assert said[-1] == (
        "GPU memory: 40.0 of 80.0 GiB free, 10.0 GiB a trainer, one share kept for the start evaluation: "
        "2 of 6 at once"
    )
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert gpu_concurrency(6, 10.0, tmp_path, said.append) == 6 and len(said) == 2  # a CPU: no check
