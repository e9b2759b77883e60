"""Experiments end to end with scripted stages: linked runs, the table, resuming, inputs."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from webapp.corpora.models import Index
from webapp.datasets.models import Dataset
from webapp.experiments import inputs, processes, services, stage_specs
from webapp.experiments.models import Experiment, ExperimentRun
from webapp.experiments.specs import ExperimentConfigError, JudgeChoice
from webapp.runs.models import Run
from webapp.trajectories.models import JudgeVerdict

pytestmark = pytest.mark.django_db


def test_it_trains_every_method_from_the_same_start_and_evaluates_every_model(
    make_spec: Any, fake_stages: dict[str, Any], start_model: Path
) -> None:
    spec = make_spec()
    experiment = services.experiment_create(user=None, spec=spec, enqueue=False)

    experiment = services.experiment_execute(experiment_id=experiment.pk)

    assert experiment.status == Experiment.Status.FINISHED, experiment.error
    links = list(experiment.links.order_by("position").select_related("run"))
    assert [(link.role, link.method) for link in links] == [
        ("start_eval", "search_r1"),
        ("start_eval", "hiprag"),
        ("train", "search_r1"),
        ("eval", "search_r1"),
        ("train", "hiprag"),
        ("eval", "hiprag"),
    ]
    assert all(link.run.status == Run.Status.FINISHED and link.attempts == 1 for link in links)
    by = {(link.role, link.method): link.run for link in links}
    # Same start, same questions, same seed for every method; each trained model is what was evaluated.
    for method in ("search_r1", "hiprag"):
        train = by[("train", method)]
        assert train.model_name == str(start_model) and by[("start_eval", method)].model_name == str(
            start_model
        )
        assert train.config["training"]["seed"] == spec.seed
        # the runner's questions/train.jsonl: the chosen training questions (in the runner's seeded order)
        assert set(train.dataset.questions.values_list("external_id", flat=True)) == set(
            Dataset.objects.get(pk=spec.train_dataset_id).questions.values_list("external_id", flat=True)
        )
        assert train.config["rollout"]["options"]["judge"] == "evidence"
        assert by[("eval", method)].model_name == train.config["output_dir"]
        assert by[("eval", method)].config["dataset_ids"] == [spec.eval_dataset_id]
    assert by[("eval", "hiprag")].base_run_id == by[("eval", "search_r1")].pk
    assert by[("eval", "search_r1")].base_run_id == by[("start_eval", "search_r1")].pk
    # The evidence judge measures Search-R1's over-search too (HiPRAG reports the baseline's OSR).
    assert JudgeVerdict.objects.filter(
        trajectory__run=by[("eval", "search_r1")], detector="over_search", judge_model="evidence-heuristic"
    ).exists()

    result = experiment.result
    assert [row["label"] for row in result["rows"]] == [
        "start · search_r1",
        "trained · search_r1",
        "start · hiprag",
        "trained · hiprag",
    ]
    assert all(row["n"] == 4 for row in result["rows"])
    hiprag_row = result["rows"][3]
    assert (
        hiprag_row["cem"] == 1.0 and hiprag_row["average_searches"] == 1.0 and hiprag_row["osr"] is not None
    )
    labels = [d["label"] for d in result["differences"]]
    assert labels == ["hiprag − search_r1 (trained)", "search_r1: trained − start", "hiprag: trained − start"]
    first = result["differences"][0]
    assert first["n_pairs"] == 4 and [m["metric"] for m in first["metrics"]][:4] == ["cem", "acc", "em", "f1"]
    searches = next(m for m in first["metrics"] if m["metric"] == "average_searches")
    assert searches["difference"] == 0.0 and searches["low"] == searches["high"] == 0.0
    assert result["judge"].startswith("evidence — heuristic")


def test_a_killed_experiment_resumes_where_it_stopped(make_spec: Any, fake_stages: dict[str, Any]) -> None:
    experiment = services.experiment_create(user=None, spec=make_spec(), enqueue=False)
    fake_stages["interrupt"] = (
        "hiprag"  # the runner's hiprag trainer is interrupted: the runner stops, failed
    )

    experiment = services.experiment_execute(experiment_id=experiment.pk)

    assert experiment.status == Experiment.Status.FAILED and "KeyboardInterrupt" in experiment.error
    assert "stages not finished: eval-search_r1-s0, train-hiprag-s0, eval-hiprag-s0" in experiment.error
    before = {(link.role, link.method): link.run_id for link in experiment.links.all()}
    assert ("train", "hiprag") not in before and ("train", "search_r1") in before

    out = StringIO()
    call_command("experiment", "--resume", str(experiment.pk), stdout=out, stderr=StringIO())

    experiment.refresh_from_db()
    assert experiment.status == Experiment.Status.FINISHED, experiment.error
    after = {(link.role, link.method): link for link in experiment.links.select_related("run")}
    for stage in (
        ("start_eval", "search_r1"),
        ("start_eval", "hiprag"),
        ("train", "search_r1"),
    ):
        assert after[stage].run_id == before[stage] and after[stage].attempts == 1  # reused, not rerun
    # the runner skipped the stages it finished: only the interrupted trainer ran again
    assert fake_stages["trained"] == ["train-search_r1-s0", "train-hiprag-s0", "train-hiprag-s0"]
    assert "hiprag − search_r1 (trained)" in out.getvalue()


def test_a_live_experiment_is_not_executed_twice(make_spec: Any) -> None:
    experiment = services.experiment_create(user=None, spec=make_spec(), enqueue=False)
    Experiment.objects.filter(pk=experiment.pk).update(
        status="running", pid=1, hostname=processes.socket.gethostname()
    )
    with pytest.raises(processes.ExperimentBusy, match="process 1"):
        services.experiment_execute(experiment_id=experiment.pk)


def test_the_command_builds_the_experiment_from_files_and_prints_the_table(
    question_file: Path, index: Index, start_model: Path, fake_stages: dict[str, Any], tmp_path: Path
) -> None:
    out, err = StringIO(), StringIO()
    call_command(
        "experiment",
        *("--model", str(start_model), "--train-questions", str(question_file), "--train-split", "train"),
        *("--eval-questions", str(question_file), "--eval-split", "test", "--eval-limit", "3"),
        *("--index-id", str(index.pk), "--steps", "1", "--num-generations", "2", "--batch-size", "2"),
        *("--resamples", "100", "--seed", "3"),
        stdout=out,
        stderr=err,
    )
    text = out.getvalue()
    lines = text.splitlines()
    assert lines[0] == "judge: evidence — heuristic (scoring.judging.evidence, no LLM)"
    assert lines[1].split()[:14] == [
        "Model", "Run", "Steps", "N", "CEM", "acc", "(FlashRAG)", "EM", "F1", "#Search", "OSR", "USR", "Format", "%"
    ]  # fmt: skip
    rows = [line for line in lines[3:7]]
    assert [r.split("#")[0].strip() for r in rows] == [
        "start · search_r1",
        "trained · search_r1",
        "start · hiprag",
        "trained · hiprag",
    ]
    assert rows[3].split()[4:6] == ["1", "3"]  # steps, N
    assert "hiprag − search_r1 (trained):" in text and "3 paired questions" in text
    osr_line = next(
        line for line in text.split("hiprag − search_r1 (trained):")[1].splitlines() if line.startswith("OSR")
    )
    assert len(osr_line.split()) >= 5  # baseline, method, diff, CI
    assert "resume with" not in text and "--resume" in err.getvalue()
    experiment = Experiment.objects.get()
    assert (
        experiment.spec["run"]["training"]["seed"] == 3
        and experiment.spec["run"]["training"]["max_steps"] == 1
    )
    assert Run.objects.filter(kind="train").count() == 2 and Run.objects.filter(kind="eval").count() == 4


def test_the_command_names_the_option_at_fault(
    question_file: Path, index: Index, settings: Any, tmp_path: Path
) -> None:
    from django.core.management import CommandError

    settings.VAR_DIR = tmp_path  # no warm start there
    with pytest.raises(CommandError, match="--model: the warm-started SmolLM2 is not at"):
        call_command(
            "experiment", "--train-questions", str(question_file), "--eval-questions", str(question_file)
        )
    with pytest.raises(
        CommandError, match="--train-questions: give --train-questions FILE or --train-dataset"
    ):
        call_command("experiment", "--model", "tiny-random")
    with pytest.raises(CommandError, match="--eval: no question left"):
        call_command(
            "experiment", "--model", "tiny-random", "--train-questions", str(question_file),
            "--eval-questions", str(question_file), "--eval-split", "nope", "--index-id", str(index.pk),
        )  # fmt: skip
    with pytest.raises(CommandError, match="--methods: unknown method 'hiprog'"):
        call_command(
            "experiment", "--model", "tiny-random", "--methods", "search_r1,hiprog",
            "--train-questions", str(question_file), "--eval-questions", str(question_file),
            "--index-id", str(index.pk),
        )  # fmt: skip


def test_the_command_has_help() -> None:
    from webapp.experiments.management.commands.experiment import Command

    text = Command().create_parser("manage.py", "experiment").format_help()
    for option in ("--train-questions", "--eval-questions", "--train-limit", "--eval-limit", "--index", "--judge",
                   "--steps", "--seed", "--model", "--methods", "--resume", "--max-turns"):  # fmt: skip
        assert option in text


def test_guessable_training_questions_can_be_left_out(
    question_file: Path, index: Index, start_model: Path, fake_stages: dict[str, Any], tmp_path: Path
) -> None:
    """Experiment #2's lesson (docs/experiment.md): yes/no questions and those naming their answer among their
    options pay an outcome reward for not searching; --train-drop-guessable leaves them out, and the training
    dataset's name says so."""
    rows = inputs.read_question_file(question_file)
    rows[0] = {**rows[0], "question": "Is Paris the capital of France?", "golden_answers": ["yes"]}
    rows[1] = {**rows[1], "question": "Which is bigger, Paris or Lyon?", "golden_answers": ["Paris"]}
    assert [r["id"] for r in inputs.select_rows(rows, split="train")] == ["q0", "q1", "q2", "q3"]
    assert [r["id"] for r in inputs.select_rows(rows, split="train", drop_guessable=True)] == ["q2", "q3"]
    assert [r["id"] for r in inputs.select_rows(rows, split="train", limit=1, drop_guessable=True)] == ["q2"]
    with pytest.raises(ExperimentConfigError, match="all 2 questions of the split are guessable") as error:
        inputs.select_rows(rows[:2], split="train", drop_guessable=True)
    assert (
        error.value.field == "train_drop_guessable"
    )  # the command says --train-drop-guessable, the form its box
    question_file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    call_command(
        "experiment",
        *("--model", str(start_model), "--train-questions", str(question_file), "--train-split", "train"),
        "--train-drop-guessable",
        *("--eval-questions", str(question_file), "--eval-split", "test", "--eval-limit", "2"),
        *("--index-id", str(index.pk), "--steps", "1", "--num-generations", "2", "--batch-size", "2"),
        *("--resamples", "50", "--methods", "hiprag"),
        stdout=StringIO(),
        stderr=StringIO(),
    )
    dataset = Dataset.objects.get(pk=Experiment.objects.get().spec["train_dataset_id"])
    assert dataset.name.startswith("experiment-train-unguessable-2-")
    assert sorted(dataset.questions.values_list("external_id", flat=True)) == ["q2", "q3"]


def test_inputs_select_reuse_and_refuse(question_file: Path, settings: Any, tmp_path: Path) -> None:
    settings.EXPERIMENTS_DIR = tmp_path / "experiments"
    rows = inputs.read_question_file(question_file)
    chosen = inputs.select_rows(rows, split="test", limit=2)
    assert [r["id"] for r in chosen] == ["q4", "q5"]
    first = inputs.experiment_dataset(rows=chosen, label="eval")
    assert inputs.experiment_dataset(rows=chosen, label="eval").pk == first.pk  # the same selection, reused
    assert first.question_count == 2 and first.questions.first().metadata["supporting_titles"] == ["Paris"]
    assert inputs.dataset_rows(first)[0]["question"] == chosen[0]["question"]
    with pytest.raises(ExperimentConfigError, match="no question left"):
        inputs.experiment_dataset(rows=[], label="train")
    assert inputs.judge_choice("http://judge/v1", model="m").kind == "openai"
    with pytest.raises(ExperimentConfigError, match="judge"):
        inputs.judge_choice("ftp://x")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "x"}\n')
    with pytest.raises(ExperimentConfigError, match=r"bad\.jsonl:1"):
        inputs.read_question_file(bad)


def test_an_index_folder_is_registered_once(db: Any, tmp_path: Path) -> None:
    from retrieval.index import IndexConfig, build_index

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        "".join(
            json.dumps({"id": str(i), "contents": f'"T{i}"\nText {i} about Paris'}) + "\n" for i in range(5)
        )
    )
    build_index(corpus, tmp_path / "bm25", IndexConfig(kind="bm25"))
    index = inputs.index_for_folder(tmp_path / "bm25")
    assert (index.kind, index.status, index.path) == ("bm25", "ready", str((tmp_path / "bm25").resolve()))
    assert index.corpus.source_path.endswith("corpus.jsonl")
    assert inputs.index_for_folder(tmp_path / "bm25").pk == index.pk
    with pytest.raises(ExperimentConfigError, match="index"):
        inputs.index_for_folder(tmp_path / "nothing")


def test_the_spec_is_checked(make_spec: Any) -> None:
    with pytest.raises(ExperimentConfigError, match="baseline"):
        services.experiment_create(user=None, spec=make_spec(baseline="autosearch"), enqueue=False)
    with pytest.raises(ExperimentConfigError, match="needs an LLM judge"):
        services.experiment_create(
            user=None, spec=make_spec(methods=("search_r1", "tiresrag")), enqueue=False
        )
    with pytest.raises(ExperimentConfigError, match=r"multiple of training\.num_generations"):
        services.experiment_create(user=None, spec=make_spec(batch_size=3), enqueue=False)
    with pytest.raises(ExperimentConfigError, match="one of transformers, vllm") as error:
        services.experiment_create(user=None, spec=make_spec(eval_engine="sglang"), enqueue=False)
    assert error.value.field == "eval_engine"
    assert services.experiment_create(user=None, spec=make_spec(judge=JudgeChoice("none")), enqueue=False).pk
    assert ExperimentRun.objects.count() == 0


def test_the_evaluations_run_on_the_chosen_engine(make_spec: Any) -> None:
    spec = make_spec(eval_engine="vllm")
    evaluation = stage_specs.evaluation_spec(spec, spec.arm("hiprag"), spec.model)
    assert evaluation.backend == "vllm" and evaluation.batch_size == spec.eval_batch_size
    assert stage_specs.evaluation_spec(make_spec(), spec.arm("hiprag"), spec.model).backend == "transformers"


def test_a_spec_stored_with_flat_knobs_still_loads() -> None:
    """Experiments stored before the knobs were trainer config values kept them flat, under their option names."""
    from webapp.experiments.specs import ExperimentSpec

    stored = {
        "methods": ["search_r1", "hiprag"],
        "baseline": "search_r1",
        "model": "tiny-random",
        "train_dataset_id": 1,
        "eval_dataset_id": 2,
        "index_id": 3,
        "judge": {"kind": "evidence", "base_url": "", "model": "", "api_key_env": ""},
        "steps": 4,
        "seed": 7,
        "batch_size": 8,
        "learning_rate": 1e-5,
        "max_turn_tokens": 96,
        "sample_every": 1,
    }
    spec = ExperimentSpec.from_json(stored)

    assert (spec.steps, spec.seed) == (4, 7)
    assert spec.run["training"]["per_device_train_batch_size"] == 8
    assert spec.run["rollout"]["max_turn_tokens"] == 96
    assert spec.knob("model.trainable_layers") == 10  # not stored: the experiment's default
    assert ExperimentSpec.from_json(spec.to_json()) == spec


@pytest.mark.parametrize(
    ("text", "name", "method", "params"),
    [
        ("outcome=hiprag:lambda_p=0", "outcome", "hiprag", {"lambda_p": 0}),
        (
            "process=hiprag:lambda_p=0.4,process=over_only",
            "process",
            "hiprag",
            {"lambda_p": 0.4, "process": "over_only"},
        ),
        ("hiprag", "hiprag", "hiprag", {}),  # a bare method: an arm named after it
        ("base=search_r1", "base", "search_r1", {}),
        ("hiprag:lambda_f=0.2", "hiprag", "hiprag", {"lambda_f": 0.2}),  # weights without a name
    ],
)
def test_an_arm_is_a_name_a_method_and_its_weights(text: str, name: str, method: str, params: dict) -> None:
    from webapp.experiments.specs import parse_arm

    arm = parse_arm(text)
    assert (arm.name, arm.method, arm.params) == (name, method, params)


def test_arms_are_checked(make_spec: Any) -> None:
    from webapp.experiments.specs import Arm

    twice = (Arm("a", "hiprag"), Arm("a", "hiprag", {"lambda_p": 0.4}))
    with pytest.raises(ExperimentConfigError, match="listed twice"):
        services.experiment_create(user=None, spec=make_spec(arms=twice, baseline="a"), enqueue=False)
    weights = (Arm("a", "hiprag"), Arm("b", "hiprag", {"lambda_p": 11}))  # HiPRAG: 0 ≤ λp ≤ 10
    with pytest.raises(ExperimentConfigError, match=r"b: .*lambda_p") as error:
        services.experiment_create(user=None, spec=make_spec(arms=weights, baseline="a"), enqueue=False)
    assert error.value.field == "arm"


def test_the_commands_help_names_arms_and_the_trainers_knobs(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        call_command("experiment", "--help")
    text = capsys.readouterr().out
    assert "--arm NAME=METHOD[:KEY=VALUE,...]" in text and "--methods" in text
    # Knobs come from trainer.config, with their help and the experiment's own defaults.
    assert "--lr-scheduler-type {linear,constant,cosine}" in text and "default constant" in text
    assert "--questions-per-step" in text and "--max-turn-tokens" in text and "--steps" in text
    # The training rollouts' engine, named apart from the evaluations' --eval-engine.
    assert "--rollout-engine {transformers,vllm}" in text and "--eval-engine {transformers,vllm}" in text
    # A boolean knob is a --flag / --no-flag pair (argparse's type=bool would read "False" as true).
    assert "--dynamic-sampling, --no-dynamic-sampling" in text and "--dynamic-sampling-max-draws" in text


def test_the_migration_turns_a_stored_experiment_into_an_arm_per_method(make_spec: Any) -> None:
    """experiments/0002_arms: the spec gets arms (and the LR decay it trained with), train/eval links their arm."""
    import importlib

    from django.apps import apps

    from webapp.experiments.specs import ExperimentSpec

    migration = importlib.import_module("webapp.experiments.migrations.0002_arms")
    spec = make_spec().to_json()
    spec.pop("arms")
    spec["methods"] = ["search_r1", "hiprag"]
    experiment = Experiment.objects.create(name="old", spec=spec)
    run = Run.objects.create(name="r", kind="eval", method="hiprag")
    for role in ("start_eval", "train", "eval"):
        ExperimentRun.objects.create(experiment=experiment, role=role, method="hiprag", position=0, run=run)

    migration.to_arms(apps, None)

    experiment.refresh_from_db()
    loaded = ExperimentSpec.from_json(experiment.spec)
    assert [(a.name, a.method, a.params) for a in loaded.arms] == [
        ("search_r1", "search_r1", {}),
        ("hiprag", "hiprag", {}),
    ]
    assert loaded.knob("training.lr_scheduler_type") == "linear"
    assert sorted(experiment.links.values_list("role", "arm")) == [
        ("eval", "hiprag"),
        ("start_eval", ""),
        ("train", "hiprag"),
    ]


def test_the_screen_samples_the_start_model_and_trains_on_the_questions_it_kept(
    make_spec: Any, fake_stages: dict[str, Any]
) -> None:
    spec = make_spec(screen_samples=2, screen_min_passes=2, screen_max_passes=2)
    experiment = services.experiment_create(user=None, spec=spec, enqueue=False)

    experiment = services.experiment_execute(experiment_id=experiment.pk)

    assert experiment.status == Experiment.Status.FINISHED, experiment.error
    screens = list(experiment.links.filter(role="screen").select_related("run").order_by("position"))
    assert [(link.position, link.arm) for link in screens] == [(0, "sample-1"), (1, "sample-2")]
    for sample, link in enumerate(screens, start=1):  # the training questions, sampled as training samples
        assert link.run.config["dataset_ids"] == [spec.train_dataset_id]
        assert link.run.config["rollout"]["seed"] == spec.seed + sample
        assert link.run.config["rollout"]["temperature"] == 1.0
    train = experiment.links.get(role="train", arm="hiprag").run
    # the runner's questions/train.jsonl: the questions the screen kept
    assert train.dataset_id != spec.train_dataset_id and train.dataset.name.startswith(
        "experiment-train-screened-4-"
    )
    from webapp.datasets.models import Question

    screened = [q.metadata["screen"] for q in Question.objects.filter(dataset=train.dataset)]
    assert len(screened) == 4 and all(s == {"passes": 2, "samples": 2, "kept": "screened"} for s in screened)
    assert len(experiment.result["rows"]) == 4  # the screen adds no row to the table


def test_the_screen_keeps_a_share_unscreened() -> None:
    from trainer.jobs.screen_rule import screened_rows

    rows = [{"id": f"q{i}", "question": f"{i}?", "golden_answers": ["x"]} for i in range(10)]
    counts = {"q0": 1, "q1": 2, "q2": 3, "q3": 0}  # of 4 samples; the rest never answered

    kept = screened_rows(rows, counts, samples=4, low=1, high=3, unscreened_share=0.25, seed=0)

    assert [r["id"] for r in kept][:3] == ["q0", "q1", "q2"]
    assert [r["metadata"]["screen"]["kept"] for r in kept] == ["screened"] * 3 + ["unscreened"]
    assert kept[3]["metadata"]["screen"]["passes"] == 0
