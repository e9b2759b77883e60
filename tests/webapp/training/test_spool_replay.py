"""A run on a machine without the web app: the trainer reports to its spool (``python -m trainer.report_client
--spool-only``), and replaying the spool (``manage.py replay_spool``, the Imports page) is how its results arrive."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command

from tests.webapp.training.conftest import FAKE_TRAINER
from trainer import spool
from webapp.common.importing import DataImportError
from webapp.imports.models import ImportJob
from webapp.imports.services import import_job_run
from webapp.runs.models import MetricPoint, Run
from webapp.runs.services import run_create, run_mark_started
from webapp.training.models import IngestedSample
from webapp.training.spool_replay import spool_replay, unpack_spool
from webapp.trajectories.models import Trajectory

ROOT = Path(__file__).resolve().parents[3]
STEPS, SAMPLES = 3, 2  # the fake trainer's steps, and samples written at each
METRICS = STEPS * 4  # 4 finite keys a step; its NaN "kl" is dead-lettered by the client, never spooled


@pytest.fixture(scope="module")
def detached_spool(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The spool of a fake trainer run detached: no URL, no database, only the report client and its spool."""
    folder = tmp_path_factory.mktemp("detached")
    config = folder / "config.json"
    output = folder / "output"
    config.write_text(
        json.dumps(
            {
                "output_dir": str(output),
                "method": "hiprag",
                "algorithm": "grpo",
                "model": {"path": "tiny-random"},
            }
        )
    )
    command = [
        sys.executable,
        "-m",
        "trainer.report_client",
        "--spool-only",
        "--spool",
        str(folder / "spool"),
    ]
    command += [
        "--config",
        str(config),
        "--output-dir",
        str(output),
        "--name",
        "gpu box run",
        "--interval",
        "0.1",
    ]
    command += ["--", sys.executable, str(FAKE_TRAINER), str(config), "--steps", str(STEPS)]
    command += ["--samples", str(SAMPLES), "--sleep", "0.01"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert '"batches_spooled"' in done.stdout and '"batches_pending": 0' in done.stdout
    return folder / "spool"


def _copy(source: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(source, tmp_path / "spool"))


def _replay(folder: Path, *args: str) -> str:
    out = io.StringIO()
    call_command("replay_spool", str(folder), *args, stdout=out)
    return out.getvalue()


def test_the_detached_spool_holds_a_manifest_every_batch_and_the_dead_letters(detached_spool: Path) -> None:
    manifest = json.loads((detached_spool / spool.MANIFEST_FILE).read_text())
    assert manifest["name"] == "gpu box run" and manifest["method"] == "hiprag" and manifest["exit_code"] == 0
    assert manifest["model_name"] == "tiny-random" and manifest["config"]["algorithm"] == "grpo"
    assert manifest["finished_at"] >= manifest["started_at"]
    batches = [json.loads(p.read_text()) for p in spool.batch_files(detached_spool)]
    assert sum(len(b.get("metrics") or ()) for b in batches) == METRICS
    assert sum(len(b.get("samples") or ()) for b in batches) == STEPS * SAMPLES
    assert batches[-1]["final"] == "finished"
    assert "step 3 done" in [b["log_tail"] for b in batches if b.get("log_tail")][-1]  # sent when it changed
    assert spool.dead_letter_count(detached_spool) == STEPS  # the NaN kl of each step
    assert "step 3 done" in (detached_spool / spool.LOG_FILE).read_text()


@pytest.mark.django_db
def test_a_replayed_spool_is_a_finished_run_with_its_curves_and_samples(
    detached_spool: Path, tmp_path: Path, researcher_client: Any
) -> None:
    folder = _copy(detached_spool, tmp_path)
    printed = _replay(folder)

    run = Run.objects.get()
    assert f"run {run.pk} (created)" in printed
    assert f"{METRICS} metrics stored (0 already stored), {STEPS * SAMPLES} samples stored" in printed
    assert "0 refused, 3 never spooled" in printed
    assert (run.name, run.kind, run.method, run.algorithm) == ("gpu box run", "train", "hiprag", "grpo")
    assert run.status == Run.Status.FINISHED and run.config["executor"] == "external"
    manifest = json.loads((folder / spool.MANIFEST_FILE).read_text())
    assert run.finished_at.strftime("%Y-%m-%dT%H:%M:%SZ") == manifest["finished_at"]  # the trainer's, not now
    assert run.heartbeat_at == run.finished_at and run.started_at <= run.finished_at
    assert MetricPoint.objects.filter(run=run).count() == METRICS
    assert Trajectory.objects.filter(run=run).count() == STEPS * SAMPLES

    page = researcher_client.get(f"/runs/{run.pk}/").content.decode()
    assert "reward/mean" in page and "replayed into searchlab" in page and 'id="run-curves"' in page
    assert (
        "What is the capital of France?"
        in researcher_client.get(f"/runs/{run.pk}/trajectories/").content.decode()
    )
    curve = researcher_client.get(f"/api/v1/runs/{run.pk}/metrics/?key=reward/mean").json()
    assert "0.3" in json.dumps(curve)  # the last step's reward/mean (0.1 × step)


@pytest.mark.django_db
def test_replaying_twice_adds_nothing(detached_spool: Path, tmp_path: Path) -> None:
    folder = _copy(detached_spool, tmp_path)
    _replay(folder)
    run = Run.objects.get()
    again = _replay(folder)

    assert f"run {run.pk} (existing)" in again
    assert (
        f"0 metrics stored ({METRICS} already stored), 0 samples stored ({STEPS * SAMPLES} already" in again
    )
    assert Run.objects.count() == 1 and MetricPoint.objects.filter(run=run).count() == METRICS
    assert Trajectory.objects.filter(run=run).count() == IngestedSample.objects.filter(run=run).count() == 6
    assert Run.objects.get().status == Run.Status.FINISHED
    assert (
        Run.objects.get().heartbeat_at == Run.objects.get().finished_at
    )  # the trainer's, after a replay too


@pytest.mark.django_db
def test_a_corrupt_spool_file_is_named_with_its_line_and_nothing_is_lost(
    detached_spool: Path, tmp_path: Path
) -> None:
    folder = _copy(detached_spool, tmp_path)
    first = spool.batch_files(folder)[0]
    text = first.read_text()
    first.write_text(text[: len(text) // 2])  # cut short, as a broken copy would
    before = {p.name: p.read_bytes() for p in folder.iterdir()}

    with pytest.raises(CommandError) as caught:
        _replay(folder)

    assert f"{folder}/{first.name}, line 1: invalid JSON" in str(caught.value)
    assert Run.objects.count() == 0 and MetricPoint.objects.count() == 0  # nothing half stored
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before  # the spool untouched
    shutil.copy(spool.batch_files(detached_spool)[0], first)  # repaired: the replay stores it all
    assert f"{METRICS} metrics stored" in _replay(folder)


@pytest.mark.django_db
def test_refused_rows_are_reported_and_the_rest_stored(tmp_path: Path) -> None:
    folder = tmp_path / "spool"
    spool.write_manifest(folder, spool.manifest_for({"method": "hiprag"}, name="x", command=["t"]))
    (folder / "000000000001.json").write_text(
        json.dumps(
            {
                "metrics": [{"step": 1, "key": "reward/mean", "value": 0.5, "time": 1.7e9}],
                "samples": [{"key": "1@0", "row": {"step": 1, "text": 42}}],
            }
        )
    )
    with pytest.raises(DataImportError, match="model_name"):  # the manifest checked first
        spool_replay(folder)
    manifest = json.loads((folder / spool.MANIFEST_FILE).read_text())
    spool.write_manifest(folder, {**manifest, "model_name": "m"})

    result = spool_replay(folder)

    assert result.metrics == 1 and result.samples == 0
    assert [(r["file"], r["kind"], r["index"], r["field"]) for r in result.refused] == [
        ("000000000001.json", "samples", 0, "row.text")
    ]
    assert "refused: 000000000001.json samples[0].row.text" in "\n".join(result.lines())
    assert Run.objects.get().status == Run.Status.RUNNING  # no final status spooled yet: still running


@pytest.mark.django_db
def test_replay_into_a_named_run_and_a_method_that_differs_is_refused(
    detached_spool: Path, tmp_path: Path
) -> None:
    folder = _copy(detached_spool, tmp_path)
    other = run_create(name="o", method="search_r1", model_name="m", kind=Run.Kind.TRAIN, algorithm="grpo")
    with pytest.raises(CommandError, match="a search_r1 run; the spool's manifest says hiprag"):
        _replay(folder, "--run", str(other.pk))
    target = run_create(
        name="t",
        method="hiprag",
        model_name="m",
        kind=Run.Kind.TRAIN,
        algorithm="grpo",
        config={"executor": "external"},
    )
    run_mark_started(run_id=target.pk)

    assert f"run {target.pk} (existing)" in _replay(folder, "--run", str(target.pk))
    assert MetricPoint.objects.filter(run=target).count() == METRICS
    assert f"run {target.pk} (existing)" in _replay(folder)  # found again by the manifest's id
    assert Run.objects.count() == 2


def _archive(folder: Path, target: Path, *, extra: tuple[str, bytes] | None = None) -> Path:
    with tarfile.open(target, "w:gz") as archive:
        archive.add(folder, arcname="spool")
        if extra:
            info = tarfile.TarInfo(extra[0])
            info.size = len(extra[1])
            archive.addfile(info, io.BytesIO(extra[1]))
    return target


@pytest.mark.django_db
def test_the_imports_page_replays_a_spool_archive_and_links_its_run(
    detached_spool: Path,
    tmp_path: Path,
    researcher_client: Any,
    settings: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    settings.UPLOAD_DIR = tmp_path / "uploads"
    archive = _archive(detached_spool, tmp_path / "run.tar.gz")
    with django_capture_on_commit_callbacks(execute=False):
        response = researcher_client.post(
            "/imports/", {"kind": "spool", "file": SimpleUploadedFile("run.tar.gz", archive.read_bytes())}
        )
    assert response.status_code == 302
    job = import_job_run(job_id=ImportJob.objects.get().pk)  # what the worker's task does

    assert job.status == "finished", job.error
    run = Run.objects.get(pk=job.options["run_id"])
    assert job.record_count == METRICS + STEPS * SAMPLES and run.created_by.username == "rey"
    assert f'href="/runs/{run.pk}/"' in researcher_client.get("/imports/jobs/").content.decode()
    assert not list(Path(settings.VAR_DIR).glob("spool-*"))  # the unpacked copy removed


@pytest.mark.django_db
def test_an_archive_escaping_its_folder_or_over_the_limits_is_refused(
    detached_spool: Path, tmp_path: Path, settings: Any
) -> None:
    escaping = _archive(detached_spool, tmp_path / "bad.tar.gz", extra=("../outside.txt", b"x"))
    with (
        pytest.raises(DataImportError, match=r"not a readable \.tar\.gz"),
        unpack_spool(escaping, "bad.tar.gz"),
    ):
        pass
    assert not (tmp_path / "outside.txt").exists()
    settings.UPLOAD_MAX_UNPACKED_FILES = 3
    with (
        pytest.raises(DataImportError, match="UPLOAD_MAX_UNPACKED"),
        unpack_spool(_archive(detached_spool, tmp_path / "big.tar.gz"), "big.tar.gz"),
    ):
        pass
    assert Run.objects.count() == 0


def test_spool_only_needs_a_spool_and_the_config(tmp_path: Path) -> None:
    from trainer.report_client import main

    with pytest.raises(SystemExit):
        main(["--spool-only", "--output-dir", str(tmp_path), "--", "true"])
    with pytest.raises(SystemExit):
        main(["--output-dir", str(tmp_path), "--", "true"])  # without --spool-only, --url is required


@pytest.mark.slow
@pytest.mark.django_db
def test_a_tiny_model_trained_detached_on_cpu_arrives_by_replay(
    tmp_path: Path, researcher_client: Any
) -> None:
    """python -m trainer.train on the tiny random Llama (2 GRPO steps, scripted rollouts) under the detached report
    client, its spool replayed: the run page has the trainer's curves and samples (25–40 s on 2 shared cores)."""
    pytest.importorskip("torch")
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                "output_dir": str(tmp_path / "run"),
                "method": "hiprag",
                "model": {"path": "tiny-random", "torch_threads": 1},
                "training": {"max_steps": 2, "per_device_train_batch_size": 4, "num_generations": 2},
                "logging": {"sample_every": 1, "samples_per_log": 2},
            }
        )
    )
    folder = tmp_path / "spool"
    command = [sys.executable, "-m", "trainer.report_client", "--spool-only", "--spool", str(folder)]
    command += ["--config", str(config), "--output-dir", str(tmp_path / "run"), "--interval", "0.5"]
    command += ["--", sys.executable, "-m", "trainer.train", str(config)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TRL_EXPERIMENTAL_SILENCE": "1"}
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    printed = _replay(folder)

    run = Run.objects.get()
    assert run.status == Run.Status.FINISHED and "0 refused" in printed
    steps = set(MetricPoint.objects.filter(run=run, key="reward/mean").values_list("step", flat=True))
    assert steps == {1, 2}
    samples = Trajectory.objects.filter(run=run).count()
    assert samples >= 2 and f"{samples} samples stored" in printed
    page = researcher_client.get(f"/runs/{run.pk}/").content.decode()
    assert "reward/mean" in page and "tiny-random" in page


@pytest.mark.django_db
def test_the_replay_bench_on_small_settings(tmp_path: Path) -> None:
    from tests.bench_scripts import bench_script

    bench = bench_script("spool_replay")
    assert bench.write_spool(tmp_path / "spool", steps=3, keys=2, samples=2) == 3

    first, second = spool_replay(tmp_path / "spool"), spool_replay(tmp_path / "spool")

    assert (first.batches, first.metrics, first.samples, first.refused) == (3, 6, 6, [])
    assert (second.metrics, second.metrics_duplicate, second.samples, second.samples_duplicate) == (
        0,
        6,
        0,
        6,
    )
    assert Run.objects.get().status == Run.Status.FINISHED


@pytest.mark.django_db
def test_what_an_http_client_left_in_its_spool_is_replayed_into_its_run(tmp_path: Path) -> None:
    from trainer.report_client import ReportClient

    run = run_mark_started(
        run_id=run_create(
            name="ray", method="hiprag", model_name="m", kind=Run.Kind.TRAIN, algorithm="grpo"
        ).pk
    )
    client = ReportClient(
        "http://127.0.0.1:9", run.pk, "token", tmp_path / "spool"
    )  # never flushed: undelivered
    client.submit(
        {"metrics": [{"step": 1, "key": "reward/mean", "value": 0.5, "time": 1.7e9}], "samples": []}
    )
    with pytest.raises(CommandError, match=r"manifest\.json: missing .*name its run with --run"):
        _replay(tmp_path / "spool")

    assert f"run {run.pk} (existing): 1 batches, 1 metrics stored" in _replay(
        tmp_path / "spool", "--run", str(run.pk)
    )
    assert MetricPoint.objects.get(run=run).value == 0.5
