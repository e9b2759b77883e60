"""An experiment run without the web app arrives by replaying its spool (``manage.py replay_spool``, the Imports
page): the spool becomes the experiment, its stages and runs, and the table computed here from the records
(spools built by hand per the contract: tests.webapp.experiments.spool_builder)."""

from __future__ import annotations

import json
import re
import shutil
import tarfile
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command

from tests.webapp.experiments.spool_builder import (
    ARMS,
    STAGES,
    make_spool,
    mean,
    pack,
    records,
    write_json,
)
from webapp.common.importing import DataImportError
from webapp.corpora.models import Index
from webapp.experiments.legacy_bundle import bundle_to_spool
from webapp.experiments.models import Experiment
from webapp.experiments.spool_replay import experiment_spool_replay
from webapp.imports.models import ImportJob
from webapp.imports.replay import replay_path
from webapp.imports.services import import_job_run
from webapp.runs.models import MetricPoint, Run
from webapp.trajectories.models import Trajectory

REPO = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def experiments_dir(settings: Any, tmp_path: Path) -> None:
    settings.EXPERIMENTS_DIR = tmp_path / "experiments"


def test_a_spool_becomes_an_experiment_whose_table_is_its_records(tmp_path: Path, index: Index) -> None:
    folder = make_spool(tmp_path, index)

    replay = experiment_spool_replay(folder, index_folder=index.path)

    experiment = replay.experiment
    assert experiment.status == Experiment.Status.FINISHED and experiment.error == ""
    assert replay.created and replay.added == STAGES and replay.missing == []
    stages = [(link.role, link.arm) for link in experiment.links.order_by("position")]
    assert stages == [
        ("screen", "sample-1"),
        ("start_eval", ""),
        ("train", "outcome"),
        ("eval", "outcome"),
        ("train", "process"),
        ("eval", "process"),
    ]
    rows = {row["label"]: row for row in experiment.result["rows"]}
    names = {"start · hiprag": "start", "trained · outcome": "outcome", "trained · process": "process"}
    assert set(rows) == set(names)
    for label, policy in names.items():  # the web app's report of the stored trajectories is the records'
        evaluated = records(policy)
        for metric, key in (("cem", "cem"), ("em", "em"), ("f1", "f1"), ("average_searches", "n_searches")):
            assert rows[label][metric] == pytest.approx(mean(evaluated, key)), (label, metric)
        assert rows[label]["format_ok_rate"] == pytest.approx(mean(evaluated, "format_ok"))
        assert rows[label]["n"] == 4
    assert rows["trained · outcome"]["average_searches"] == 2.0 and rows["trained · process"]["cem"] == 0.75
    assert rows["trained · process"]["steps"] == 2  # the steps the arm logged
    differences = {d["label"]: d for d in experiment.result["differences"]}
    searches = next(
        m for m in differences["process − outcome (trained)"]["metrics"] if m["metric"] == "average_searches"
    )
    assert searches["difference"] == -2.0
    # The arms' curves and configs came with them; each evaluation of a trained model names its training.
    train = {link.arm: link.run for link in experiment.links.filter(role="train")}
    assert train["process"].config["reward"]["params"] == {"lambda_p": 0.4}
    assert train["process"].status == Run.Status.FINISHED and train["process"].name.endswith(
        "train · process"
    )
    assert MetricPoint.objects.filter(run=train["process"], key="osr_redundant").count() == 2
    evals = {link.arm: link.run for link in experiment.links.filter(role__in=("eval", "start_eval"))}
    assert (
        evals["process"].model_name
        == train["process"].config["output_dir"]
        == "/elsewhere/work/runs/process-s0"
    )
    # The baseline's trained model against the start; the other arm against the baseline.
    assert (
        evals["outcome"].base_run_id == evals[""].pk and evals["process"].base_run_id == evals["outcome"].pk
    )
    assert evals["process"].dataset.name.startswith("experiment-eval-4-")
    assert train["process"].dataset.name.startswith("experiment-train-screened-3-")
    repeat = Trajectory.objects.filter(run=evals["outcome"]).first()
    assert repeat is not None and "rule: repeated_query" in [v.raw_reply for v in repeat.verdicts.all()]
    assert "GPU: an accelerator" in experiment.log_tail
    assert list(folder.rglob("*.import.jsonl")) == []  # the spool is only read


def test_the_replayed_experiment_shows_in_the_browser_with_its_arms_and_curves(
    tmp_path: Path, index: Index, researcher_client: Any
) -> None:
    archive = pack(make_spool(tmp_path, index), tmp_path / "results.tar.gz")
    experiment = Experiment.objects.get(pk=replay_path(archive, index_folder=index.path).experiment_id)

    page = researcher_client.get(f"/experiments/{experiment.pk}/").content.decode()

    assert 'id="imported-from"' in page and "results.tar.gz" in page
    assert "outcome = hiprag (lambda_p=0.0)" in page and "process = hiprag (lambda_p=0.4)" in page
    assert "trained · process" in page and "Resume" not in page
    from webapp.experiments.selectors import experiment_compare_query

    compare = researcher_client.get(
        f"/compare/?{experiment_compare_query(experiment=experiment)}"
    ).content.decode()
    curves = json.loads(
        compare.split('<script id="compare-curves-data" type="application/json">')[1].split("</script>")[0]
    )
    assert sorted(c["label"].split(" ", 1)[1] for c in curves) == [
        f"exp{experiment.pk} train · outcome",
        f"exp{experiment.pk} train · process",
    ]
    process = next(c for c in curves if c["label"].endswith("process"))
    assert process["series"]["osr_redundant"] == [[1, 0.5], [2, 0.25]]


def test_a_spool_cut_short_is_stored_failed_naming_what_it_lacks_and_cannot_be_resumed(
    tmp_path: Path, index: Index, researcher_client: Any
) -> None:
    make_spool(tmp_path, index, leave_out=("eval-process-s0",))

    experiment = experiment_spool_replay(tmp_path / "out", index_folder=index.path).experiment

    assert experiment.status == Experiment.Status.FAILED
    assert "the spool has no finished eval-process-s0" in experiment.error
    assert [row["label"] for row in experiment.result["rows"]] == ["start · hiprag", "trained · outcome"]
    response = researcher_client.post(f"/experiments/{experiment.pk}/resume/")
    assert response.status_code == 400 and b"cannot be resumed" in response.content
    assert Experiment.objects.get(pk=experiment.pk).status == Experiment.Status.FAILED


def test_a_stage_still_running_or_failed_is_left_out_and_named(tmp_path: Path, index: Index) -> None:
    folder = make_spool(tmp_path, index)
    manifest = json.loads((folder / "stages/eval-process-s0/manifest.json").read_text())
    write_json(
        folder / "stages/eval-process-s0/manifest.json",
        {**manifest, "status": "running", "finished_at": None},
    )
    train = json.loads((folder / "stages/train-process-s0/manifest.json").read_text())
    write_json(folder / "stages/train-process-s0/manifest.json", {**train, "exit_code": 137})

    replay = experiment_spool_replay(folder, index_folder=index.path)

    assert replay.missing == ["train-process-s0", "eval-process-s0"]
    assert (
        "no finished train-process-s0 (its trainer exited with 137), eval-process-s0"
        in replay.experiment.error
    )
    assert not Run.objects.filter(name__contains="train · process").exists()


def test_a_malformed_line_names_the_spool_file_line_and_field_and_stores_nothing(
    tmp_path: Path, index: Index
) -> None:
    folder = make_spool(tmp_path, index)
    path = folder / "stages/eval-process-s0/records.jsonl"
    lines = path.read_text().splitlines()
    record = json.loads(lines[1])
    del record["text"]
    lines[1] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n")
    broken = pack(folder, tmp_path / "broken.tar.gz")
    runs_before = Run.objects.count()

    with pytest.raises(DataImportError) as error:
        replay_path(broken, index_folder=index.path)

    assert (
        str(error.value)
        == "broken.tar.gz:out/stages/eval-process-s0/records.jsonl, line 2: field 'text': missing"
    )
    assert not Experiment.objects.exists() and Run.objects.count() == runs_before


def test_an_unreadable_batch_of_a_training_stage_is_named_with_its_line_and_nothing_is_stored(
    tmp_path: Path, index: Index
) -> None:
    folder = make_spool(tmp_path, index)
    (folder / "stages/train-process-s0/000000000001.json").write_text('{"metrics": [}\n')
    runs_before = Run.objects.count()

    with pytest.raises(DataImportError) as error:
        experiment_spool_replay(folder, index_folder=index.path, label="results.tar.gz:out")

    assert str(error.value).startswith(
        "results.tar.gz:out/stages/train-process-s0/000000000001.json, line 1: invalid JSON"
    )
    assert not Experiment.objects.exists() and Run.objects.count() == runs_before


def test_a_manifest_field_at_fault_is_named(tmp_path: Path, index: Index) -> None:
    folder = make_spool(tmp_path, index)
    manifest = json.loads((folder / "manifest.json").read_text())
    write_json(folder / "manifest.json", {**manifest, "seeds": [0, 2]})

    with pytest.raises(
        DataImportError, match=r"out/manifest\.json: field 'seeds': seed k is the first seed \+ k"
    ):
        experiment_spool_replay(folder, index_folder=index.path)
    write_json(folder / "manifest.json", {**manifest, "baseline": "nobody"})
    with pytest.raises(
        DataImportError, match=r"manifest\.json: field 'baseline': 'nobody' is not one of the arms"
    ):
        experiment_spool_replay(folder, index_folder=index.path)
    assert not Experiment.objects.exists()


def test_a_spool_of_another_corpus_is_refused_and_its_own_corpus_index_is_found(
    tmp_path: Path, index: Index
) -> None:
    folder = make_spool(tmp_path, index)
    index.metadata = {"corpus_sha256": "0ther"}
    index.save(update_fields=["metadata"])

    with pytest.raises(DataImportError) as error:
        experiment_spool_replay(folder, index_folder=index.path)
    assert "index_metadata.json: field 'corpus_sha256'" in str(error.value) and "same corpus" in str(
        error.value
    )
    with pytest.raises(DataImportError, match="no ready index of this corpus here"):
        experiment_spool_replay(folder)  # no index named, and none of the spool's corpus

    index.metadata = {"corpus_sha256": "c0ffee"}
    index.save(update_fields=["metadata"])
    experiment = experiment_spool_replay(folder).experiment  # found by its corpus checksum
    assert experiment.spec["index_id"] == index.pk and experiment.status == Experiment.Status.FINISHED


def test_replaying_again_stores_nothing_new(tmp_path: Path, index: Index) -> None:
    folder = make_spool(tmp_path, index)
    first = experiment_spool_replay(folder, index_folder=index.path)
    counts = (Run.objects.count(), Trajectory.objects.count(), MetricPoint.objects.count())

    again = experiment_spool_replay(folder, index_folder=index.path)

    assert not again.created and again.experiment.pk == first.experiment.pk and again.added == []
    assert (Run.objects.count(), Trajectory.objects.count(), MetricPoint.objects.count()) == counts
    assert Experiment.objects.count() == 1 and again.experiment.status == Experiment.Status.FINISHED
    assert again.experiment.result == first.experiment.result


def test_a_spool_that_grew_adds_the_stages_finished_since(tmp_path: Path, index: Index) -> None:
    make_spool(tmp_path, index, leave_out=("train-process-s0", "eval-process-s0"))
    first = experiment_spool_replay(tmp_path / "out", index_folder=index.path)
    assert first.experiment.status == Experiment.Status.FAILED
    assert first.missing == ["train-process-s0", "eval-process-s0"]
    shutil.rmtree(tmp_path / "out")
    make_spool(tmp_path, index)  # the runner went on: the same spool id, every stage finished

    grown = experiment_spool_replay(tmp_path / "out")  # the index the first replay used

    assert grown.experiment.pk == first.experiment.pk and not grown.created
    assert grown.added == ["train-process-s0", "eval-process-s0"] and grown.missing == []
    assert grown.experiment.status == Experiment.Status.FINISHED and grown.experiment.error == ""
    labels = [row["label"] for row in grown.experiment.result["rows"]]
    assert labels == ["start · hiprag", "trained · outcome", "trained · process"]
    assert grown.experiment.links.count() == 6 and Experiment.objects.count() == 1


def test_the_command_prints_the_table_and_names_a_bad_file(tmp_path: Path, index: Index) -> None:
    archive = pack(make_spool(tmp_path, index), tmp_path / "results.tar.gz")
    printed = StringIO()

    call_command("replay_spool", str(archive), "--index", index.path, stdout=printed)

    assert "(created)" in printed.getvalue() and ": finished" in printed.getvalue()
    assert (
        "trained · process" in printed.getvalue()
        and "stages added: screen-1, start-hiprag" in printed.getvalue()
    )
    (tmp_path / "junk.tar.gz").write_bytes(b"not a tar")
    with pytest.raises(CommandError, match=re.escape("junk.tar.gz: not a readable .tar.gz")):
        call_command("replay_spool", str(tmp_path / "junk.tar.gz"), "--index", index.path)
    with pytest.raises(CommandError, match="a run to write into is for a run spool"):
        call_command("replay_spool", str(archive), "--run", "1")


def test_the_import_page_takes_an_experiment_spool_and_links_the_experiment_it_made(
    tmp_path: Path,
    index: Index,
    researcher_client: Any,
    settings: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    settings.UPLOAD_DIR = tmp_path / "uploads"
    archive = pack(make_spool(tmp_path, index), tmp_path / "results.tar.gz")
    upload = SimpleUploadedFile("results.tar.gz", archive.read_bytes())

    with django_capture_on_commit_callbacks(execute=False):
        response = researcher_client.post("/imports/", {"kind": "spool", "file": upload, "index": index.pk})
    assert response.status_code == 302
    job = import_job_run(job_id=ImportJob.objects.get().pk)  # what the worker's task does

    assert job.status == "finished", job.error
    experiment = Experiment.objects.get(pk=job.options["experiment_id"])
    assert experiment.status == Experiment.Status.FINISHED
    assert experiment.name == "HiPRAG λp 0 vs 0.4 (imported from results.tar.gz)"
    assert job.record_count == 16  # 4 questions screened + 3 evaluations of 4
    jobs = researcher_client.get("/imports/jobs/").content.decode()
    assert f'href="/experiments/{experiment.pk}/"' in jobs
    assert "results.tar.gz" in researcher_client.get(f"/experiments/{experiment.pk}/").content.decode()


def test_the_import_page_fails_a_bad_spool_naming_its_file(
    tmp_path: Path,
    index: Index,
    researcher_client: Any,
    settings: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    settings.UPLOAD_DIR = tmp_path / "uploads"
    archive = pack(make_spool(tmp_path, index), tmp_path / "results.tar.gz")
    index.metadata = {"corpus_sha256": "0ther"}
    index.save(update_fields=["metadata"])
    uploads = {"junk.tar.gz": b"not a tar", "results.tar.gz": archive.read_bytes()}

    for name, content in uploads.items():  # no index chosen: the spool's corpus has none here
        with django_capture_on_commit_callbacks(execute=False):
            researcher_client.post("/imports/", {"kind": "spool", "file": SimpleUploadedFile(name, content)})
    jobs = {job.original_filename: import_job_run(job_id=job.pk) for job in ImportJob.objects.all()}

    assert jobs["junk.tar.gz"].status == "failed"
    assert jobs["junk.tar.gz"].error.startswith("junk.tar.gz: not a readable .tar.gz")
    assert jobs["results.tar.gz"].status == "failed"
    assert jobs["results.tar.gz"].error.startswith(
        "results.tar.gz:out/index_metadata.json: field 'corpus_sha256': no ready index of this corpus here"
    )
    assert not Experiment.objects.exists()


H100_RUN = REPO / "docs" / "experiments" / "experiment2-h100-2026-11-27.tar.gz"


def test_the_h100_bundle_is_rewritten_as_an_experiment_spool(tmp_path: Path) -> None:
    """The bundle layout before the spool (what docs/experiments/ keeps) becomes the spool the replay reads."""
    with tarfile.open(H100_RUN) as archive:
        archive.extractall(tmp_path / "bundle", filter="data")

    out = bundle_to_spool(tmp_path / "bundle" / "out", tmp_path / "spool", "h100.tar.gz:out")

    manifest = json.loads((out / "manifest.json").read_text())
    assert (manifest["format"], manifest["baseline"], manifest["seeds"]) == (
        "searchlab-experiment-spool",
        "outcome",
        [0],
    )
    assert manifest["status"] == "finished" and manifest["screen"] == {"samples": 3, "min": 1, "max": 3}
    assert sorted(p.name for p in (out / "stages").iterdir()) == sorted(
        ["screen-1", "screen-2", "screen-3", "start-hiprag", *STAGES[2:]]
    )
    train = json.loads((out / "stages/train-process-s0/manifest.json").read_text())
    assert (train["format"], train["exit_code"], train["config"]["reward"]["params"]) == (
        "searchlab-spool",
        0,
        {"lambda_p": 0.4},
    )
    batch = json.loads((out / "stages/train-process-s0/000000000001.json").read_text())
    assert batch["final"] == "finished" and max(m["step"] for m in batch["metrics"]) == 23
    evaluated = json.loads((out / "stages/eval-process-s0/manifest.json").read_text())
    assert (evaluated["role"], evaluated["status"], evaluated["questions"]) == ("eval", "finished", 200)
    assert evaluated["model"] == train["config"]["output_dir"]
    assert sorted(p.name for p in (out / "questions").iterdir()) == [
        "candidates.jsonl",
        "eval.jsonl",
        "train.jsonl",
    ]
    again = bundle_to_spool(tmp_path / "bundle" / "out", tmp_path / "again")
    assert (
        json.loads((again / "manifest.json").read_text())["id"] == manifest["id"]
    )  # the same bundle, the same id


def test_the_h100_run_imports_with_the_table_docs_experiment_md_quotes(index: Index) -> None:
    """Experiment #2 as it ran on the H100 (docs/experiment.md): its bundle (the layout before the experiment
    spool), kept in the repository, replays as an experiment whose table, computed here from the stored
    trajectories, is the script's own table.json there (1,200 trajectories: about 4 s on an idle machine)."""
    with tarfile.open(H100_RUN) as archive:
        member = archive.extractfile("out/table.json")
        assert member is not None
        table = json.load(member)
        member = archive.extractfile("out/index_metadata.json")
        assert member is not None
        index.metadata = {"corpus_sha256": json.load(member)["corpus_sha256"]}
    index.save(update_fields=["metadata"])
    printed = StringIO()

    call_command("replay_spool", str(H100_RUN), "--index", index.path, stdout=printed)

    experiment = Experiment.objects.get()
    assert experiment.status == Experiment.Status.FINISHED and "NVIDIA H100" in experiment.log_tail
    assert "trained · process" in printed.getvalue()
    rows = {row["label"]: row for row in experiment.result["rows"]}
    names = {
        "start · hiprag": "start",
        "trained · outcome": "trained_outcome",
        "trained · process": "trained_process",
    }
    for label, name in names.items():
        for metric in ("cem", "em", "f1", "average_searches", "osr", "usr", "format_ok_rate"):
            assert rows[label][metric] == pytest.approx(table["rows"][name][metric]), (label, metric)
        assert rows[label]["n"] == 200
    assert (rows["trained · outcome"]["steps"], rows["trained · process"]["steps"]) == (24, 23)
    # what the docs quote: the λp = 0 arm stopped searching, the λp = 0.4 arm kept one search
    searched = [rows[f"trained · {arm}"]["average_searches"] for arm in ("outcome", "process")]
    assert searched == [0, 1]
    searches = next(
        m
        for d in experiment.result["differences"]
        if d["label"] == "process − outcome (trained)"
        for m in d["metrics"]
        if m["metric"] == "average_searches"
    )
    assert (searches["difference"], searches["low"], searches["high"]) == pytest.approx((1.0, 1.0, 1.0))


def test_a_spool_of_two_seed_pairs_replays_every_pair_linked_by_its_seed(
    tmp_path: Path, index: Index
) -> None:
    folder = make_spool(tmp_path, index, seeds=(3, 4))

    replay = experiment_spool_replay(folder, index_folder=index.path)

    experiment = replay.experiment
    assert experiment.status == Experiment.Status.FINISHED, experiment.error
    assert experiment.spec["seeds"] == 2 and experiment.spec["run"]["training"]["seed"] == 3
    assert replay.added[2:] == [
        f"{kind}-{arm}-s{seed}" for seed in (3, 4) for arm in ARMS for kind in ("train", "eval")
    ]
    links = {(link.role, link.arm, link.seed): link.run for link in experiment.links.all()}
    assert len(links) == 10 and links[("start_eval", "", 3)].kind == "eval"
    # each pair's other arm against the baseline of the same seed; each training its own seed's spool
    assert links[("eval", "process", 4)].base_run_id == links[("eval", "outcome", 4)].pk
    assert links[("eval", "outcome", 4)].base_run_id == links[("start_eval", "", 3)].pk
    assert links[("train", "process", 4)].config["training"]["seed"] == 4
    assert links[("train", "process", 4)].name == f"exp{experiment.pk} train · process · seed 4"
    assert links[("eval", "process", 4)].model_name == "/elsewhere/work/runs/process-s4"
    assert experiment.result["seeds"] == [3, 4] and [p["seed"] for p in experiment.result["pairs"]] == [3, 4]
    assert experiment.result["pooled"]


@pytest.mark.slow
def test_the_runners_cpu_smoke_replays_as_an_experiment(tmp_path: Path, index: Index) -> None:
    """``python -m trainer.jobs experiment --smoke`` end to end (a tiny model screened, both arms trained, every
    model evaluated on the CPU), then its spool replayed: every stage stored, the table computed here."""
    from tests.conftest import REPO_ROOT, shared_dir
    from trainer.jobs.__main__ import main

    data = shared_dir() / "data" / "wiki_multihop"
    if not (data / "questions.jsonl").is_file():
        pytest.skip(f"the wiki_multihop questions are not at {data}")
    corpus = tmp_path / "corpus.jsonl"  # a slice: retrieval works, the index builds in seconds
    with (data / "corpus.jsonl").open(encoding="utf-8") as source:
        corpus.write_text(
            "".join(line for _, line in zip(range(2000), source, strict=False)), encoding="utf-8"
        )
    split = REPO_ROOT / "demo" / "experiment3_split.json"
    out, work = tmp_path / "out", tmp_path / "work"
    args = [
        "experiment",
        "--smoke",
        f"--split={split}",
        f"--work={work}",
        f"--out={out}",
        f"--corpus={corpus}",
    ]
    assert main([*args, f"--questions={data / 'questions.jsonl'}"]) == 0, (out / "log.txt").read_text()
    index.metadata = json.loads((out / "index_metadata.json").read_text())
    index.save(update_fields=["metadata"])

    replay = experiment_spool_replay(out, index_folder=index.path)

    experiment = replay.experiment
    assert experiment.status == Experiment.Status.FINISHED, experiment.error
    assert replay.missing == [] and sorted(replay.added) == sorted(p.name for p in (out / "stages").iterdir())
    rows = {row["label"]: row for row in experiment.result["rows"]}
    assert {"start · hiprag", "trained · outcome", "trained · process"} <= set(rows)
    trained = experiment.links.get(role="train", arm="process").run
    assert trained.status == Run.Status.FINISHED
    assert MetricPoint.objects.filter(run=trained, key="reward/mean").exists()
