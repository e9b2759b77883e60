"""``manage.py experiment_import``: bench/experiment_gpu.py's bundle becomes the web app's experiment.

The fast tests build a bundle as the script writes it: its own record and table functions over real evaluations
(scripted HiPRAG policies, a keyword searcher, the evidence judge), its own trainer configs. The slow test runs the
script itself (its --smoke, a tiny model on the CPU) and imports what it returned.
"""

from __future__ import annotations

import json
import re
import tarfile
from argparse import Namespace
from io import StringIO
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command

from agent.evaluate import Judges, evaluate_sync
from agent.rollout import Question
from tests.agent.conftest import PASSAGES, KeywordSearcher, ScriptedBackend
from tests.agent.test_rollout import response
from tests.bench_scripts import bench_script
from tests.webapp.evaluation.conftest import hiprag_two_steps
from webapp.common.importing import DataImportError
from webapp.corpora.models import Index
from webapp.experiments.bundles import experiment_import
from webapp.experiments.models import Experiment, ExperimentRun
from webapp.imports.models import ImportJob
from webapp.imports.services import import_job_run
from webapp.runs.models import MetricPoint, Run
from webapp.trajectories.models import Trajectory

REPO = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.django_db


def _script() -> ModuleType:
    return bench_script("experiment_gpu")


def search_twice(text: str) -> str:
    """HiPRAG's two steps with the first query asked again as the second: a redundant search (the evidence judge's
    repeated_query)."""
    r = response(text)
    if "<context>" in r and r.count("<step>") == 1 and not r.endswith("<conclusion>"):
        return "\n<step>\n    <reasoning>Check it again.</reasoning>\n    <search>capital of France</search>"
    return hiprag_two_steps(text)


def no_search(text: str) -> str:
    if "<conclusion>" not in response(text):
        return " I know this one.</reasoning>\n    <conclusion>Paris</conclusion>"
    return "\n</think>\n<answer>Berlin</answer>" if "(7)" in text else "\n</think>\n<answer>Paris</answer>"


def _rows(ids: range, split: str) -> list[dict[str, Any]]:
    return [
        {
            "id": f"q{i}",
            "question": f"What is the capital of France ({i})?",
            "golden_answers": ["Paris"],
            "metadata": {"split": split, "supporting_titles": ["Paris"]},
        }
        for i in ids
    ]


def _evaluated(script: ModuleType, policy: Any, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    questions = [Question(id=r["id"], text=r["question"], golds=tuple(r["golden_answers"])) for r in rows]
    result = evaluate_sync(
        ScriptedBackend(policy), KeywordSearcher(PASSAGES), "hiprag", questions, judges=Judges(evidence=True)
    )
    return [script.record_row(record) for record in result.records]


def _write(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def make_bundle(
    tmp_path: Path, index: Index, *, leave_out: tuple[str, ...] = ()
) -> tuple[Path, dict[str, Any]]:
    """A bundle as bench/experiment_gpu.py writes it: a screen of 1 sample, both arms trained 2 steps, every model
    evaluated on 4 held-out questions; returns it and the script's own table of it."""
    script = _script()
    out = tmp_path / "out"
    screen_rows, kept, held_out = (
        _rows(range(4), "train"),
        _rows(range(3), "train"),
        _rows(range(4, 8), "test"),
    )
    _write(out / "screen_questions.jsonl", screen_rows)
    _write(out / "train_questions.jsonl", kept)
    _write(out / "eval_questions.jsonl", held_out)
    (out / "experiment.json").write_text(
        json.dumps(
            {
                "arms": [
                    {"name": arm, "method": "hiprag", "params": {"lambda_p": lp}}
                    for arm, lp in script.ARMS.items()
                ],
                "baseline": script.BASELINE,
                "start_model": "/elsewhere/work/start",
                "judge": "evidence",
                "seed": 0,
                "steps": 2,
                "screen": {"samples": 1, "min": 0, "max": 1},
            }
        )
    )
    (out / "index_metadata.json").write_text(json.dumps({"corpus_sha256": "c0ffee"}))
    (out / "log.txt").write_text("[    1.0 s] torch 2.13.0, GPU: an accelerator\n[  99.0 s] done\n")
    args = Namespace(
        steps=2,
        seed=0,
        learning_rate=5e-5,
        temperature=0.7,
        num_generations=2,
        max_turns=4,
        max_rollout_tokens=768,
    )
    for arm in script.ARMS:
        folder = Path("/elsewhere/work/runs") / arm
        config = script.arm_config(
            args, arm, Path("/elsewhere/work/start"), Path("t.jsonl"), Path("i"), folder
        )
        (out / "runs" / arm).mkdir(parents=True)
        (out / "runs" / arm / "run_config.json").write_text(json.dumps(config.to_dict()))
        _write(
            out / "runs" / arm / "metrics.jsonl",
            [
                {"step": step, "time": 1.0e9 + step, "key": key, "value": value}
                for step in (1, 2)
                for key, value in (
                    ("osr_redundant", 0.5 if arm == "outcome" else 0.5 / step),
                    ("osr", 0.6),
                    ("searches/mean", 2.0 if arm == "outcome" else 2.0 / step),
                )
            ],
        )
    evals = {
        "screen_1": _evaluated(script, hiprag_two_steps, screen_rows),
        "start": _evaluated(script, hiprag_two_steps, held_out),
        "trained_outcome": _evaluated(script, search_twice, held_out),
        "trained_process": _evaluated(script, no_search, held_out),
    }
    for name, records in evals.items():
        if name not in leave_out:
            _write(out / f"eval_{name}.jsonl", records)
    table = script.table({k: v for k, v in evals.items() if k != "screen_1" and k not in leave_out}, 0)
    bundle = tmp_path / "results.tar.gz"
    with tarfile.open(bundle, "w:gz") as archive:
        archive.add(out, arcname="out")
    index.metadata = {"corpus_sha256": "c0ffee"}
    index.save(update_fields=["metadata"])
    return bundle, table


@pytest.fixture(autouse=True)
def experiments_dir(settings: Any, tmp_path: Path) -> None:
    settings.EXPERIMENTS_DIR = tmp_path / "experiments"


def test_a_bundle_becomes_an_experiment_whose_table_is_the_scripts(tmp_path: Path, index: Index) -> None:
    bundle, table = make_bundle(tmp_path, index)

    experiment = experiment_import(path=bundle, index_folder=index.path)

    assert experiment.status == Experiment.Status.FINISHED and experiment.error == ""
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
    names = {
        "start · hiprag": "start",
        "trained · outcome": "trained_outcome",
        "trained · process": "trained_process",
    }
    assert set(rows) == set(names)
    for (
        label,
        name,
    ) in names.items():  # the web app's report of the imported trajectories is the script's table
        for metric in ("cem", "em", "f1", "average_searches", "osr", "usr", "format_ok_rate"):
            assert rows[label][metric] == pytest.approx(table["rows"][name][metric]), (label, metric)
        assert rows[label]["n"] == 4
    assert rows["trained · outcome"]["average_searches"] == 2.0 and rows["trained · process"]["cem"] == 0.75
    assert rows["trained · process"]["steps"] == 2  # the steps the arm logged
    differences = {d["label"]: d for d in experiment.result["differences"]}
    searches = next(
        m for m in differences["process − outcome (trained)"]["metrics"] if m["metric"] == "average_searches"
    )
    script_diff = table["differences"]["trained_process − trained_outcome"]["average_searches"]
    assert searches["difference"] == pytest.approx(script_diff["difference"]) == -2.0
    assert (searches["low"], searches["high"]) == pytest.approx((script_diff["low"], script_diff["high"]))
    # The arms' curves and configs came with them; each evaluation of a trained model names its training.
    train = {link.arm: link.run for link in experiment.links.filter(role="train")}
    assert train["process"].config["reward"]["params"] == {"lambda_p": 0.4}
    assert MetricPoint.objects.filter(run=train["process"], key="osr_redundant").count() == 2
    trained_eval = experiment.links.get(role="eval", arm="process").run
    assert trained_eval.model_name == train["process"].config["output_dir"] == "/elsewhere/work/runs/process"
    assert trained_eval.dataset.name.startswith("experiment-eval-4-")
    assert train["process"].dataset.name.startswith("experiment-train-screened-3-")
    repeat = Trajectory.objects.filter(run=experiment.links.get(role="eval", arm="outcome").run).first()
    assert repeat is not None and "rule: repeated_query" in [v.raw_reply for v in repeat.verdicts.all()]
    assert "GPU: an accelerator" in experiment.log_tail


def test_the_imported_experiment_shows_in_the_browser_with_its_arms_and_curves(
    tmp_path: Path, index: Index, researcher_client: Any
) -> None:
    bundle, _ = make_bundle(tmp_path, index)
    experiment = experiment_import(path=bundle, index_folder=index.path)

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


def test_a_bundle_cut_short_is_stored_failed_naming_what_it_lacks_and_cannot_be_resumed(
    tmp_path: Path, index: Index, researcher_client: Any
) -> None:
    bundle, _ = make_bundle(tmp_path, index, leave_out=("trained_process",))

    experiment = experiment_import(path=bundle, index_folder=index.path)

    assert experiment.status == Experiment.Status.FAILED
    assert "no eval_trained_process.jsonl" in experiment.error
    assert [row["label"] for row in experiment.result["rows"]] == ["start · hiprag", "trained · outcome"]
    assert experiment.links.get(role="train", arm="process").run.status == Run.Status.FAILED
    response = researcher_client.post(f"/experiments/{experiment.pk}/resume/")
    assert response.status_code == 400 and b"cannot be resumed" in response.content
    assert Experiment.objects.get(pk=experiment.pk).status == Experiment.Status.FAILED


def test_a_malformed_line_names_the_bundle_file_line_and_field_and_stores_nothing(
    tmp_path: Path, index: Index
) -> None:
    bundle, _ = make_bundle(tmp_path, index)
    out = tmp_path / "broken" / "out"
    with tarfile.open(bundle) as archive:
        archive.extractall(tmp_path / "broken", filter="data")
    lines = (out / "eval_trained_process.jsonl").read_text().splitlines()
    record = json.loads(lines[1])
    del record["text"]
    lines[1] = json.dumps(record)
    (out / "eval_trained_process.jsonl").write_text("\n".join(lines) + "\n")
    broken = tmp_path / "broken.tar.gz"
    with tarfile.open(broken, "w:gz") as archive:
        archive.add(out, arcname="out")
    runs_before = Run.objects.count()

    with pytest.raises(DataImportError) as error:
        experiment_import(path=broken, index_folder=index.path)

    assert str(error.value) == "broken.tar.gz:out/eval_trained_process.jsonl, line 2: field 'text': missing"
    assert not Experiment.objects.exists() and Run.objects.count() == runs_before


def test_a_bundle_of_another_corpus_is_refused(tmp_path: Path, index: Index) -> None:
    bundle, _ = make_bundle(tmp_path, index)
    index.metadata = {"corpus_sha256": "0ther"}
    index.save(update_fields=["metadata"])

    with pytest.raises(DataImportError) as error:
        experiment_import(path=bundle, index_folder=index.path)

    assert "index_metadata.json: field 'corpus_sha256'" in str(error.value) and "same corpus" in str(
        error.value
    )


def test_the_command_prints_the_table_and_names_a_bad_file(tmp_path: Path, index: Index) -> None:
    bundle, _ = make_bundle(tmp_path, index)
    printed = StringIO()

    call_command("experiment_import", str(bundle), "--index", index.path, stdout=printed)

    assert "finished" in printed.getvalue() and "trained · process" in printed.getvalue()
    (tmp_path / "junk.tar.gz").write_bytes(b"not a tar")
    with pytest.raises(CommandError, match=re.escape("junk.tar.gz: not a readable .tar.gz")):
        call_command("experiment_import", str(tmp_path / "junk.tar.gz"), "--index", index.path)


def test_the_import_page_takes_a_bundle_and_links_the_experiment_it_made(
    tmp_path: Path,
    index: Index,
    researcher_client: Any,
    settings: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    settings.UPLOAD_DIR = tmp_path / "uploads"
    bundle, _ = make_bundle(tmp_path, index)
    upload = SimpleUploadedFile("results.tar.gz", bundle.read_bytes())

    with django_capture_on_commit_callbacks(execute=False):
        response = researcher_client.post(
            "/imports/", {"kind": "experiment", "file": upload, "index": index.pk}
        )
    assert response.status_code == 302
    job = import_job_run(job_id=ImportJob.objects.get().pk)  # what the worker's task does

    assert job.status == "finished", job.error
    experiment = Experiment.objects.get(pk=job.options["experiment_id"])
    assert experiment.status == Experiment.Status.FINISHED and experiment.name.endswith(
        "(imported from results.tar.gz)"
    )
    assert job.record_count == 16  # 4 questions screened + 3 evaluations of 4
    jobs = researcher_client.get("/imports/jobs/").content.decode()
    assert f'href="/experiments/{experiment.pk}/"' in jobs
    assert "results.tar.gz" in researcher_client.get(f"/experiments/{experiment.pk}/").content.decode()


def test_the_import_page_asks_for_the_index_and_a_bad_bundle_fails_naming_its_file(
    tmp_path: Path,
    index: Index,
    researcher_client: Any,
    settings: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    settings.UPLOAD_DIR = tmp_path / "uploads"
    refused = researcher_client.post(
        "/imports/", {"kind": "experiment", "file": SimpleUploadedFile("results.tar.gz", b"x")}
    )
    assert refused.status_code == 200 and b"needs the index" in refused.content

    with django_capture_on_commit_callbacks(execute=False):
        researcher_client.post(
            "/imports/",
            {
                "kind": "experiment",
                "file": SimpleUploadedFile("results.tar.gz", b"not a tar"),
                "index": index.pk,
            },
        )
    job = import_job_run(job_id=ImportJob.objects.get().pk)

    assert job.status == "failed" and job.error.startswith("results.tar.gz: not a readable .tar.gz")
    assert not Experiment.objects.exists()


@pytest.mark.slow
def test_the_scripts_smoke_run_imports_as_an_experiment(tmp_path: Path, index: Index) -> None:
    """bench/experiment_gpu.py --smoke end to end (a tiny model warm-started, screened, both arms trained, every
    model evaluated; about a minute here), then its bundle imported."""
    corpus = tmp_path / "corpus.jsonl"
    _write(
        corpus, [{"id": str(i), "contents": f"Town {i}\nTown {i} lies on river {i % 3}."} for i in range(30)]
    )
    questions = tmp_path / "questions.jsonl"
    _write(
        questions,
        [
            {
                "id": f"t{i}",
                "question": f"Which river is town {i} on?",
                "golden_answers": [f"river {i % 3}"],
                "metadata": {"split": "train" if i < 10 else "test", "supporting_titles": [f"Town {i}"]},
            }
            for i in range(16)
        ],
    )
    bundle = tmp_path / "results.tar.gz"
    work, out = tmp_path / "work", tmp_path / "out"
    code = _script().main(
        [
            "--smoke",
            f"--work={work}",
            f"--out={out}",
            f"--bundle={bundle}",
            f"--corpus={corpus}",
            f"--questions={questions}",
        ]
    )
    assert code == 0
    log = (out / "log.txt").read_text()
    assert (
        "warm start: done" in log
    )  # the smoke warm-starts the tiny model through the recipe's plain SFT path
    config = json.loads((out / "runs" / "process" / "run_config.json").read_text())
    baseline = json.loads((out / "runs" / "outcome" / "run_config.json").read_text())
    assert config["reward"]["params"] == {"lambda_p": 0.4} and baseline["reward"]["params"] == {
        "lambda_p": 0.0
    }
    for key in ("output_dir",):
        baseline[key] = config[key]
    baseline["reward"]["params"] = config["reward"]["params"]
    baseline["training"]["stop_file"] = config["training"]["stop_file"]
    assert baseline == config  # the arms differ in λp alone
    index.path = str(work / "index-bm25")
    index.metadata = json.loads((work / "index-bm25" / "metadata.json").read_text())
    index.save(update_fields=["path", "metadata"])

    experiment = experiment_import(path=bundle, index_folder=index.path)

    assert experiment.status == Experiment.Status.FINISHED, experiment.error
    table = json.loads((out / "table.json").read_text())
    rows = {row["label"]: row for row in experiment.result["rows"]}
    for label, name in (("start · hiprag", "start"), ("trained · process", "trained_process")):
        assert rows[label]["n"] == 6
        for metric in ("cem", "average_searches", "format_ok_rate"):
            assert rows[label][metric] == pytest.approx(table["rows"][name][metric])
    assert rows["trained · process"]["steps"] == 2
    roles = list(experiment.links.values_list("role", flat=True))
    assert roles.count(ExperimentRun.Role.SCREEN) == 3 and roles.count(ExperimentRun.Role.TRAIN) == 2
    trained = experiment.links.get(role="train", arm="process").run
    assert MetricPoint.objects.filter(run=trained, key="reward/mean").exists()


H100_RUN = REPO / "docs" / "experiments" / "experiment2-h100-2026-11-27.tar.gz"


def test_the_h100_run_imports_with_the_table_docs_experiment_md_quotes(index: Index) -> None:
    """Experiment #2 as it ran on the H100 (docs/experiment.md): its bundle, kept in the repository, imports as
    an experiment whose table, computed here from the stored trajectories, is the script's own table.json there."""
    with tarfile.open(H100_RUN) as archive:
        member = archive.extractfile("out/table.json")
        assert member is not None
        table = json.load(member)
        member = archive.extractfile("out/index_metadata.json")
        assert member is not None
        index.metadata = {"corpus_sha256": json.load(member)["corpus_sha256"]}
    index.save(update_fields=["metadata"])

    experiment = experiment_import(path=H100_RUN, index_folder=index.path)

    assert experiment.status == Experiment.Status.FINISHED and "NVIDIA H100" in experiment.log_tail
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
