"""bench/experiment3_analysis.py on a synthetic experiment spool whose answer is known (written to a temp dir)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from tests.bench_scripts import bench_script

analysis = bench_script("experiment3_analysis")

N = 80


def hiprag_text(searches: int, answer: str) -> str:
    steps = "".join(
        f"<step><reasoning>r</reasoning><search>q{i}</search><context>c</context><conclusion>x</conclusion></step>"
        for i in range(searches)
    )
    steps = steps or "<step><reasoning>r</reasoning><conclusion>x</conclusion></step>"
    return f"<think>{steps}</think><answer>{answer}</answer>"


def write_arm(
    path: Path, rng: random.Random, *, searches: float, p_correct: float, long_answers: bool = False
) -> None:
    lines = []
    for i in range(N):
        k = max(0, round(rng.gauss(searches, 0.5)))
        correct = rng.random() < p_correct
        answer = f"gold{i}" if correct else "no"
        if long_answers:
            answer = " ".join(f"guess{j}" for j in range(12)) + f" gold{i}"
            correct = True
        row = {
            "id": f"nq_{i}",
            "question": f"question {i}",
            "golden_answers": [f"gold{i}"],
            "answer": answer,
            "cem": correct,
            "em": correct and not long_answers,
            "f1": float(correct),
            "format_ok": True,
            "n_searches": k,
            "over_search": [j > 0 for j in range(k)],  # every search after the first is redundant
            "under_search": [],
            "text": hiprag_text(k, answer),
            "format": "hiprag",
        }
        lines.append(json.dumps(row))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def experiment_spool(
    root: Path, rng: random.Random, effects: list[float], *, steps: int, **process: Any
) -> Path:
    """An experiment spool as ``python -m trainer.jobs experiment --seeds N`` writes it: per seed the two arms'
    training stages (run spools whose metrics reach ``steps``) and their finished evaluations."""
    out = root / "out"
    arms = [{"name": "outcome", "method": "hiprag", "params": {"lambda_p": 0.0}}]
    arms.append({"name": "process", "method": "hiprag", "params": {"lambda_p": 0.4}})
    manifest = {
        "format": "searchlab-experiment-spool",
        "version": 1,
        "id": "x",
        "name": "synthetic",
        "arms": arms,
    }
    manifest.update(baseline="outcome", seeds=list(range(len(effects))), status="finished")
    out.mkdir(parents=True)
    (out / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    for seed, effect in enumerate(effects):
        for arm, searches in (("outcome", 2.5), ("process", 2.5 - effect)):
            train = out / "stages" / f"train-{arm}-s{seed}"
            train.mkdir(parents=True)
            (train / "manifest.json").write_text(json.dumps({"format": "searchlab-spool", "exit_code": 0}))
            metrics = [
                {"step": s, "key": "reward/mean", "value": 0.1, "time": 0} for s in range(1, steps + seed + 1)
            ]
            (train / "000000000001.json").write_text(json.dumps({"metrics": metrics}), encoding="utf-8")
            evaluation = out / "stages" / f"eval-{arm}-s{seed}"
            evaluation.mkdir(parents=True)
            (evaluation / "manifest.json").write_text(json.dumps({"status": "finished", "role": "eval"}))
            write_arm(
                evaluation / "records.jsonl",
                rng,
                searches=searches,
                p_correct=0.3,
                **(process if arm == "process" else {}),
            )
    return out


def test_three_seed_pairs_give_the_pooled_json_and_tables(tmp_path: Path, capsys: Any) -> None:
    spool = experiment_spool(tmp_path, random.Random(0), [1.0, 1.3, 0.8], steps=40)
    out = tmp_path / "experiment-3.json"
    assert analysis.main([str(spool), "--json", str(out), "--resamples", "200"]) == 0
    result = json.loads(out.read_text(encoding="utf-8"))
    assert (
        result["seeds_per_arm"] == 3 and result["min_steps_per_run"] == 40 and result["eval_questions"] == N
    )
    for name in ("average_searches", "redundant_search_rate", "cem", "em"):
        entry = result["pooled"][name]
        assert {"difference", "low", "high"} <= set(entry)
        assert entry["low"] <= entry["difference"] <= entry["high"]
    searches = result["pooled"]["average_searches"]
    pair_differences = [result["pairs"][str(i)]["average_searches"]["difference"] for i in range(3)]
    assert searches["difference"] == pytest.approx(sum(pair_differences) / 3)
    assert searches["high"] < 0 and searches["same_sign"]
    assert result["pooled"]["redundant_searches_per_question"]["high"] < 0
    # the process arm makes fewer redundant searches: its rate of flagged searches falls too
    assert result["pooled"]["redundant_search_rate"]["difference"] < 0
    assert result["per_seed"]["0"]["outcome"]["top_answer"] == "no"
    assert result["per_seed"]["2"]["steps"] == {"outcome": 42, "process": 42}
    assert (
        result["per_seed"]["0"]["process"]["steps_per_trajectory"]
        < result["per_seed"]["0"]["outcome"]["steps_per_trajectory"]
    )
    # only 80 questions: the design is not met, whatever the intervals say
    assert not result["decision"]["design_met"] and result["decision"]["verdict"].startswith("design not met")
    assert "| average_searches |" in capsys.readouterr().out


def test_answers_longer_than_ten_words_lose_cem_in_the_gaming_check(tmp_path: Path) -> None:
    spool = experiment_spool(tmp_path, random.Random(1), [0.0, 0.0], steps=40, long_answers=True)
    result = analysis.analyse(spool, n_resamples=100)
    assert result["pooled"]["cem"]["difference"] > 0.5  # a list of guesses covers every gold
    assert (
        result["pooled"]["cem_le10"]["difference"] < 0
    )  # ... and counts for nothing once long answers are wrong
    assert result["per_seed"]["0"]["process"]["mean_answer_words"] == 13


def test_the_decision_rule() -> None:
    def result(seeds: int, high: float, low_cem: float, same_sign: bool = True) -> dict[str, Any]:
        entry = {"difference": high - 0.1, "low": high - 0.2, "high": high, "same_sign": same_sign}
        return {
            "seeds_per_arm": seeds,
            "min_steps_per_run": 40,
            "eval_questions": 1000,
            "pooled": {
                "average_searches": entry,
                "redundant_search_rate": {**entry, "high": None},
                "cem": {"low": low_cem},
                "em": {"low": -0.01},
            },
        }

    assert analysis.decide(result(3, -0.05, -0.01))["verdict"].startswith("supported")
    assert analysis.decide(result(3, -0.05, -0.03))["verdict"].startswith("fewer redundant searches, but")
    assert analysis.decide(result(3, 0.01, -0.01))["verdict"].startswith("not supported")
    assert analysis.decide(result(3, -0.05, -0.01, same_sign=False))["verdict"].startswith("not supported")
    assert analysis.decide(result(2, -0.05, -0.01))["verdict"].startswith("design not met")


def test_mismatched_unfinished_or_missing_evaluations_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spool = experiment_spool(tmp_path, random.Random(2), [1.0, 1.0], steps=40)
    path = spool / "stages" / "eval-process-s1" / "records.jsonl"
    path.write_text("\n".join(path.read_text().splitlines()[:-1]) + "\n")
    with pytest.raises(
        analysis.AnalysisError, match=r"out/stages/eval-process-s1/records.jsonl: 79 questions, not the 80"
    ):
        analysis.analyse(spool, n_resamples=10)
    (spool / "stages" / "eval-outcome-s1" / "records.jsonl").write_text('{"id": "x"}\n')
    with pytest.raises(
        analysis.AnalysisError, match=r"eval-outcome-s1/records.jsonl:1: no field 'golden_answers'"
    ):
        analysis.analyse(spool, n_resamples=10)
    # a pair whose evaluation has not finished is left out, and named
    (spool / "stages" / "eval-outcome-s1" / "manifest.json").write_text('{"status": "running"}')
    assert analysis.analyse(spool, n_resamples=10)["seeds_per_arm"] == 1
    assert "left out (not finished): eval-outcome-s1" in capsys.readouterr().err
    with pytest.raises(analysis.AnalysisError, match=r"missing/manifest.json: not an experiment spool"):
        analysis.analyse(tmp_path / "missing", n_resamples=10)
    with pytest.raises(analysis.AnalysisError, match=r"no arm 'other' beside the baseline 'outcome'"):
        analysis.analyse(spool, method="other", n_resamples=10)


def test_an_unreadable_training_batch_is_named(tmp_path: Path) -> None:
    spool = experiment_spool(tmp_path, random.Random(3), [1.0, 1.0], steps=40)
    (spool / "stages" / "train-process-s1" / "000000000002.json").write_text("{not json")
    with pytest.raises(
        analysis.AnalysisError, match=r"out/stages/train-process-s1/000000000002.json, line 1: invalid JSON"
    ):
        analysis.analyse(spool, n_resamples=10)
