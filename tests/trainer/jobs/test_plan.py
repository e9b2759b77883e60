"""``python -m trainer.jobs experiment``'s checks of its input: each refusal names the flag, before any model loads
or any folder is made."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainer.jobs.__main__ import main
from trainer.jobs.plan import PlanError, parse_arm, parser, plan_from_args


def _jsonl(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


ROWS: list[dict[str, object]] = [
    {"id": f"nq_{i}", "question": "q?", "golden_answers": ["x"], "metadata": {"split": split}}
    for i, split in enumerate(("train", "train", "test"))
]


def _args(tmp_path: Path, *more: str) -> list[str]:
    corpus = _jsonl(tmp_path / "c.jsonl", [])
    questions = tmp_path / "q.jsonl"
    if not questions.exists():
        _jsonl(questions, ROWS)
    return [
        "experiment",
        "--smoke",
        f"--work={tmp_path / 'w'}",
        f"--out={tmp_path / 'o'}",
        f"--corpus={corpus}",
        f"--questions={questions}",
        *more,
    ]


def _refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], *more: str) -> str:
    with pytest.raises(SystemExit):
        main(_args(tmp_path, *more))
    assert not (tmp_path / "o").exists() and not (tmp_path / "w").exists()
    return capsys.readouterr().err


def test_it_refuses_to_start_without_a_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = [a for a in _args(tmp_path) if a != "--smoke"]
    with pytest.raises(SystemExit):
        main(args)
    assert (
        "--gguf FILE (the base model), --start-model FOLDER, or --smoke is needed" in capsys.readouterr().err
    )


def test_a_bad_question_file_is_refused_naming_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    questions = tmp_path / "q.jsonl"
    questions.write_text('{"id": "a", "question": "q?", "golden_answers": ["x"]}\nnot json\n')
    assert f"--questions {questions}:2: not a FlashRAG question row" in _refused(tmp_path, capsys)


def test_a_split_naming_unknown_questions_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    split = tmp_path / "split.json"
    split.write_text(json.dumps({"train": ["nq_1"], "held_out": ["nq_2", "nq_9"]}))
    err = _refused(tmp_path, capsys, f"--split={split}")
    assert f"--split {split}: 1 held_out ids not in --questions, e.g. 'nq_9'" in err
    split.write_text(json.dumps({"train": ["nq_1", "nq_2"], "held_out": ["nq_2"]}))
    assert "1 ids are both train and held_out, e.g. 'nq_2'" in _refused(tmp_path, capsys, f"--split={split}")
    split.write_text("[]")
    assert "not a split file with 'train' and 'held_out' ids" in _refused(
        tmp_path, capsys, f"--split={split}"
    )


def test_a_question_file_without_the_splits_it_needs_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _jsonl(tmp_path / "q.jsonl", ROWS[:2])
    assert "no question whose metadata.split starts with 'test'" in _refused(tmp_path, capsys)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--arm=a=nomethod"], "--arm 'a=nomethod': method 'nomethod' is not one of"),
        (["--arm=a=hiprag:lambda_p=11", "--arm=b=hiprag"], "--arm 'a=hiprag:lambda_p=11': params.lambda_p"),
        (["--arm=a=hiprag", "--arm=a=search_r1"], "--arm arms with different names, got ['a', 'a']"),
        (["--set=training.nothing=1"], "--set training.nothing: no trainer config field"),
        (["--set=training.lr_scheduler_type=sometimes"], "--set outcome: training.lr_scheduler_type"),
        (["--set", "training.learning_rate"], "--set 'training.learning_rate': PATH=VALUE"),
        (["--learning-rate=-1"], "--learning-rate outcome: training.learning_rate"),
        (["--index=/nowhere"], "--index /nowhere: not an index folder"),
        (["--judge-spec=[1]"], "--judge-spec not a judge spec as JSON"),
        (["--screen-unscreened-share=1"], "--screen-unscreened-share 1.0: a share in [0, 1)"),
        (["--eval-engine=sglang"], "--eval-engine: invalid choice: 'sglang'"),
        (["--baseline=none"], "--baseline 'none' is not an arm (outcome, process)"),
        (["--max-turns=99"], "--max-turns must be ≤ 50, got 99"),
        (["--seeds=0"], "--seeds 0: must be at least 1"),
        (["--screen-min=3", "--screen-max=1"], "--screen-min 3..1: need 0 ≤ min ≤ max"),
        (["--judge=openai"], "--judge an OpenAI-compatible judge needs its base URL"),
        (["--judge=http://judge:8000/v1"], "--judge-model name the model the judge endpoint serves"),
        (["--judge=magic"], "--judge none, policy, evidence"),
    ],
)
def test_each_bad_setting_is_named_by_its_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    assert message in _refused(tmp_path, capsys, *flags)


def test_the_plan_holds_the_arms_seeds_and_smoke_settings(tmp_path: Path) -> None:
    split = tmp_path / "split.json"
    split.write_text(json.dumps({"train": ["nq_0", "nq_1"], "held_out": ["nq_2"]}))
    argv = _args(tmp_path, f"--split={split}", "--seeds=3", "--seed=5")[1:]
    plan = plan_from_args(parser().parse_args(argv))
    assert [a.to_json() for a in plan.arms] == [
        {"name": "outcome", "method": "hiprag", "params": {"lambda_p": 0.0}},
        {"name": "process", "method": "hiprag", "params": {"lambda_p": 0.4}},
    ]
    assert plan.baseline == "outcome" and plan.seed_values == [5, 6, 7] and plan.methods == ["hiprag"]
    assert plan.split_held_out == ("nq_2",) and plan.eval_limit == 1  # the split's held-out questions, all
    assert (plan.steps, plan.num_generations, plan.train_limit, plan.screen_min) == (2, 2, 8, 0)  # --smoke
    assert plan.judge.kind == "evidence" and plan.judge.rollout_option() == "evidence"


def test_the_web_apps_settings_reach_every_arms_trainer_config(tmp_path: Path) -> None:
    """What an experiment started in the browser sets beyond the runner's own flags (``--set``, the algorithm, the
    judge as a whole spec, one arm) is in every arm's trainer config."""
    from trainer.jobs.training import arm_config

    judge = json.dumps({"kind": "evidence", "timeout": 12.0})
    more = ["--arm=only=search_r1", "--algorithm=grpo", "--set=training.lr_scheduler_type=cosine"]
    more += ["--set=rollout.max_turn_tokens=300", f"--judge-spec={judge}", "--eval-batch-size=4"]
    plan = plan_from_args(parser().parse_args(_args(tmp_path, *more)[1:]))
    assert [a.name for a in plan.arms] == ["only"] and plan.eval_batch_size == 4
    assert plan.judge.timeout == 12.0
    config = arm_config(plan, plan.arms[0], 0, tmp_path, tmp_path, tmp_path, tmp_path)
    assert config.training.lr_scheduler_type == "cosine" and config.rollout.max_turn_tokens == 300


def test_an_arm_reads_its_weights_as_numbers() -> None:
    arm = parse_arm("bonus=hiprag:lambda_p=0.2,lambda_f=0.1")
    assert (arm.name, arm.method, arm.params) == ("bonus", "hiprag", {"lambda_p": 0.2, "lambda_f": 0.1})
    with pytest.raises(PlanError, match="a weight is key=value, got 'lambda_p'"):
        parse_arm("a=hiprag:lambda_p")


def test_the_screen_keeps_questions_answered_in_some_but_not_all_samples_by_default(tmp_path: Path) -> None:
    def plan(*more: str):  # type: ignore[no-untyped-def]
        return plan_from_args(parser().parse_args(_args(tmp_path, *more)[1:]))

    assert (plan().screen_min, plan().screen_max) == (0, 2)  # --smoke's min 0; 3 samples → at most 2 passes
    assert plan("--screen-samples=5").screen_max == 4
    assert plan("--screen-max=3").screen_max == 3  # asked for: every sample right is kept too
    with pytest.raises(PlanError, match="--screen-samples 1: some but not all of one sample is none"):
        plan("--screen-samples=1", "--screen-min=1")
