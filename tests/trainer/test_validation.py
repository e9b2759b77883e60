"""Validation during training (validation.every_steps): held-out questions evaluated greedily, reported as val/*."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.agent.conftest import PASSAGES, KeywordSearcher
from tests.trainer.conftest import ConfigFactory
from trainer.agent_rollout import AgentRollout, budgets
from trainer.callbacks import METRICS_FILE, validation_metrics
from trainer.config import ConfigError, config_from_dict
from trainer.train import DEMO_QUESTIONS, build_trainer, load_rows, load_validation_rows


def keyword_rollout(config: Any, model: Any, tokenizer: Any) -> AgentRollout:
    """The agent rollout over an in-memory keyword search engine, with the config's budgets."""
    return AgentRollout(
        config.method, tokenizer, KeywordSearcher(PASSAGES), config.rollout.options, budgets=budgets(config)
    )


FACTORY = "tests.trainer.test_validation:keyword_rollout"


@pytest.mark.slow  # 13 s on two cores: two steps, each with its rollouts and a greedy validation
def test_a_tiny_run_validating_every_step_records_held_out_metrics_at_every_step(
    make_config: ConfigFactory, model: Any, tokenizer: Any
) -> None:
    config = make_config(
        method="search_r1",
        rollout={"factory": FACTORY, "max_turns": 1, "max_turn_tokens": 8, "max_obs_tokens": 16},
        training={"max_steps": 2, "max_completion_length": 64},
        validation={"every_steps": 1, "questions": 2},
    )
    trainer = build_trainer(config, model=model, tokenizer=tokenizer)
    trainer.train()

    rows = [json.loads(line) for line in (Path(config.output_dir) / METRICS_FILE).read_text().splitlines()]
    val = {(row["step"], row["key"]): row["value"] for row in rows if row["key"].startswith("val/")}
    for step in (1, 2):
        for key in ("val/cem", "val/em", "val/average_searches", "val/format_ok_rate"):
            assert (step, key) in val, f"{key} missing at step {step}"
        assert 0.0 <= val[(step, "val/cem")] <= 1.0
        assert val[(step, "val/average_searches")] >= 0.0
    training_keys = {row["key"] for row in rows if row["step"] == 1}
    assert "reward/mean" in training_keys  # the training curves are still written beside the held-out ones


def test_validation_every_n_steps_and_at_the_last(
    make_config: ConfigFactory, model: Any, tokenizer: Any
) -> None:
    from transformers import TrainerControl, TrainerState

    from trainer.callbacks import MetricsCallback, ValidationCallback

    seen: list[int] = []
    metrics = MetricsCallback(ledger=None, output_dir="unused")  # type: ignore[arg-type]
    callback = ValidationCallback(lambda m: {"val/cem": 1.0}, 3, metrics)
    for step in range(1, 8):
        state, control = TrainerState(global_step=step, max_steps=7), TrainerControl()
        callback.on_step_end(None, state, control)  # type: ignore[arg-type]
        if control.should_log:
            seen.append(step)
    assert seen == [3, 6, 7]
    assert metrics.pending == {"val/cem": 1.0}


def test_held_out_questions_leave_the_training_data_only_while_validation_is_on(
    make_config: ConfigFactory,
) -> None:
    off = make_config(rollout={"factory": FACTORY}, validation={"every_steps": 0, "questions": 3})
    assert len(load_rows(off)) == len(DEMO_QUESTIONS) and load_validation_rows(off) == []
    on = make_config(rollout={"factory": FACTORY}, validation={"every_steps": 2, "questions": 3})
    train, held_out = load_rows(on), load_validation_rows(on)
    assert [r["id"] for r in train] == [q[0] for q in DEMO_QUESTIONS[:-3]]
    assert [r["id"] for r in held_out] == [q[0] for q in DEMO_QUESTIONS[-3:]]


def test_a_validation_file_gives_its_first_n_questions(make_config: ConfigFactory, tmp_path: Path) -> None:
    path = tmp_path / "dev.jsonl"
    path.write_text(
        "".join(
            json.dumps({"id": f"d{i}", "question": f"q{i}?", "golden_answers": ["a"]}) + "\n"
            for i in range(5)
        )
    )
    config = make_config(
        rollout={"factory": FACTORY}, validation={"every_steps": 1, "path": str(path), "questions": 2}
    )
    assert [r["id"] for r in load_validation_rows(config)] == ["d0", "d1"]
    assert len(load_rows(config)) == len(DEMO_QUESTIONS)  # a file of its own: the training data stays whole
    bad = make_config(
        rollout={"factory": FACTORY}, validation={"every_steps": 1, "path": str(tmp_path / "none.jsonl")}
    )
    with pytest.raises(ConfigError) as error:
        load_validation_rows(bad)
    assert error.value.field == "validation.path" and "none.jsonl" in str(error.value)


@pytest.mark.parametrize(
    ("values", "field"),
    [
        (
            {"validation": {"every_steps": 1}},
            "validation.every_steps",
        ),  # the scripted rollout has no search engine
        ({"validation": {"every_steps": -1}}, "validation.every_steps"),
        (
            {"rollout": {"factory": "agent"}, "validation": {"every_steps": 1, "questions": 0}},
            "validation.questions",
        ),
        ({"trackers": ["tensorboard"]}, "trackers[0]"),
        ({"trackers": ["mlflow", "mlflow"]}, "trackers"),
        ({"trackers": "mlflow"}, "trackers"),
    ],
)
def test_bad_validation_and_tracker_settings_name_their_field(values: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as error:
        config_from_dict({"output_dir": "x", **values})
    assert error.value.field == field


def test_holding_out_every_question_is_refused(make_config: ConfigFactory) -> None:
    config = make_config(
        rollout={"factory": FACTORY}, validation={"every_steps": 1, "questions": len(DEMO_QUESTIONS)}
    )
    with pytest.raises(ConfigError) as error:
        load_rows(config)
    assert error.value.field == "validation.questions"


def test_validation_metrics_come_from_the_evaluation_report() -> None:
    from scoring.aggregates import TrajectoryOutcome, evaluation_report

    report = evaluation_report(
        [
            TrajectoryOutcome(
                dataset="d",
                cem=True,
                em=False,
                f1=0.5,
                format_ok=True,
                n_searches=2,
                over_search=(True, False),
                acc=True,
            ),
            TrajectoryOutcome(
                dataset="d",
                cem=False,
                em=False,
                f1=0.0,
                format_ok=True,
                n_searches=0,
                over_search=(),
                acc=False,
            ),
        ]
    )
    metrics = validation_metrics(report)
    assert metrics["val/cem"] == 0.5 and metrics["val/em"] == 0.0 and metrics["val/acc"] == 0.5
    assert metrics["val/average_searches"] == 1.0
    assert metrics["val/osr"] == 0.5  # HiPRAG Eq. 2: one of two judged search steps
