"""An evaluation stores its judge as agent.judge_spec.JudgeSpec's fields; the judge version of the same settings
hashes as it did when the spec had fewer fields (webapp.trajectories.judge_versions)."""

from __future__ import annotations

from dataclasses import asdict

from agent.judge_spec import JudgeSpec
from webapp.trajectories.judge_versions import judge_spec, spec_sha256

# Run.judge_settings of an evaluation stored before the spec moved to agent (its seven fields).
OLD_LAYOUT = {
    "kind": "openai",
    "base_url": "http://judge:8000/v1",
    "model": "judge-m",
    "api_key_env": "JUDGE_KEY",
    "answer_judge": False,
    "timeout": 60.0,
    "concurrency": 32,
}


def test_the_same_settings_make_the_same_judge_version() -> None:
    stored_now = asdict(JudgeSpec.from_json(OLD_LAYOUT))
    assert set(OLD_LAYOUT) < set(stored_now)
    for kind in ("openai", "policy", "none"):
        old = judge_spec(method="hiprag", judge_model="judge-m", settings={**OLD_LAYOUT, "kind": kind})
        new = judge_spec(method="hiprag", judge_model="judge-m", settings={**stored_now, "kind": kind})
        assert spec_sha256(new) == spec_sha256(old)


def test_a_training_runs_endpoint_option_keeps_its_version() -> None:
    option = {"base_url": "http://judge:8000/v1", "model": "judge-m"}
    rebuilt = JudgeSpec.from_rollout_option(option).rollout_option()
    assert rebuilt == option
    assert spec_sha256(judge_spec(method="hiprag", judge_model="judge-m", settings={"judge": rebuilt})) == (
        spec_sha256(judge_spec(method="hiprag", judge_model="judge-m", settings={"judge": option}))
    )
