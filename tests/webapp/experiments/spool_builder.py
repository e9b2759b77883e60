"""An experiment spool built by hand per the contract (the runner's format, docs/experiment.md), for the replay's
tests: real evaluations (scripted HiPRAG policies, a keyword searcher, the evidence judge) as records.jsonl, run
spools of two steps of metrics as training stages."""

from __future__ import annotations

import functools
import json
import tarfile
import uuid
from pathlib import Path
from typing import Any

from agent import judges as det
from agent.evaluate import Judges, evaluate_sync
from agent.rollout import Question
from tests.agent.conftest import PASSAGES, KeywordSearcher, ScriptedBackend
from tests.agent.test_rollout import response
from tests.webapp.evaluation.conftest import hiprag_two_steps
from trainer.config import DEMO_TRAINABLE_LAYERS, config_from_dict
from webapp.corpora.models import Index

ARMS = {"outcome": 0.0, "process": 0.4}
STAGES = [
    "screen-1",
    "start-hiprag",
    "train-outcome-s0",
    "eval-outcome-s0",
    "train-process-s0",
    "eval-process-s0",
]


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


POLICIES = {
    "screen": hiprag_two_steps,
    "start": hiprag_two_steps,
    "outcome": search_twice,
    "process": no_search,
}


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


CANDIDATES, TRAIN, HELD_OUT = _rows(range(4), "train"), _rows(range(3), "train"), _rows(range(4, 8), "test")


def _flag(verdict: Any) -> bool | None:
    return None if verdict is None else bool(verdict)


@functools.cache
def records(policy: str) -> tuple[dict[str, Any], ...]:
    """The evaluated questions as the runner writes records.jsonl (the contract's fields)."""
    rows = CANDIDATES if policy == "screen" else HELD_OUT
    questions = [Question(id=r["id"], text=r["question"], golds=tuple(r["golden_answers"])) for r in rows]
    result = evaluate_sync(
        ScriptedBackend(POLICIES[policy]),
        KeywordSearcher(PASSAGES),
        "hiprag",
        questions,
        judges=Judges(evidence=True),
    )
    out = []
    for record in result.records:
        t = record.trajectory
        verdicts = [
            {
                "detector": detector,
                "outcome": "error" if _flag(r.verdict) is None else "true" if r.verdict else "false",
                "step": r.step_index,
                "judge_model": r.model,
                "raw_reply": r.reply or r.error or "",
            }
            for detector in (det.OVER_SEARCH, det.UNDER_SEARCH)
            for r in record.verdicts.get(detector, [])
            if r.step_index is not None
        ]
        out.append(
            {
                "id": record.question.id,
                "question": record.question.text,
                "golden_answers": list(record.question.golds),
                "answer": t.answer,
                "cem": record.cem,
                "em": record.em,
                "f1": record.f1,
                "format_ok": t.valid,
                "n_searches": t.n_searches,
                "over_search": [_flag(v) for v in record.flags(det.OVER_SEARCH)],
                "under_search": [_flag(v) for v in record.flags(det.UNDER_SEARCH)],
                "reward": None if record.reward is None else record.reward.total,
                "text": record.rollout.text,
                "format": "hiprag",
                "verdicts": verdicts,
            }
        )
    return tuple(out)


def write_lines(path: Path, rows: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def write_json(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value), encoding="utf-8")


def _evaluation(
    out: Path, key: str, policy: str, *, role: str, arm: str = "", seed: int | None = None
) -> None:
    rows = records(policy)
    write_lines(out / "stages" / key / "records.jsonl", rows)
    manifest = {
        "format": "searchlab-evaluation-spool",
        "version": 1,
        "role": role,
        "method": "hiprag",
        "arm": arm,
        "seed": seed,
        "sample": 1 if role == "screen" else 0,
        "model": f"/elsewhere/work/runs/{arm}-s{seed}" if arm else "/elsewhere/work/start",
        "temperature": 0.0,
        "questions": len(rows),
        "started_at": "2026-11-27T06:00:00Z",
        "finished_at": "2026-11-27T06:01:00Z",
        "status": "finished",
        "error": "",
        "seconds": 60.0,
    }
    write_json(out / "stages" / key / "manifest.json", manifest)


def _training(out: Path, arm: str, seed: int) -> None:
    """``stages/train-<arm>-s<seed>``: a run spool of two steps, as trainer/spool.py writes it."""
    values = {
        "output_dir": f"/elsewhere/work/runs/{arm}-s{seed}",
        "method": "hiprag",
        "algorithm": "grpo",
        "model": {"path": "/elsewhere/work/start", "trainable_layers": DEMO_TRAINABLE_LAYERS},
        "data": {"path": "/elsewhere/work/questions/train.jsonl"},
        "rollout": {"factory": "agent", "options": {"index": "/elsewhere/index", "judge": "evidence"}},
        "reward": {"params": {"lambda_p": ARMS[arm]}},
        "training": {"max_steps": 2, "seed": seed, "learning_rate": 5e-5, "num_generations": 2},
        "logging": {"sample_every": 1},
    }
    folder = out / "stages" / f"train-{arm}-s{seed}"
    manifest = {
        "format": "searchlab-spool",
        "version": 1,
        "id": str(uuid.uuid4()),
        "name": f"train · {arm} · seed {seed}",
        "method": "hiprag",
        "algorithm": "grpo",
        "model_name": "/elsewhere/work/start",
        "config": config_from_dict(values).to_dict(),
        "command": ["python", "-m", "trainer.train"],
        "host": "gpu-box",
        "started_at": "2026-11-27T06:02:00Z",
        "finished_at": "2026-11-27T06:05:00Z",
        "exit_code": 0,
    }
    write_json(folder / "manifest.json", manifest)
    metrics = [
        {"step": step, "time": 1.0e9 + step, "key": key, "value": value}
        for step in (1, 2)
        for key, value in (
            ("osr_redundant", 0.5 if arm == "outcome" else 0.5 / step),
            ("searches/mean", 2.0 if arm == "outcome" else 2.0 / step),
        )
    ]
    write_json(folder / "000000000001.json", {"metrics": metrics, "samples": [], "final": "finished"})
    (folder / "trainer.log").write_text("step 2 done\n")


def make_spool(
    tmp_path: Path, index: Index, *, seeds: tuple[int, ...] = (0,), leave_out: tuple[str, ...] = ()
) -> Path:
    """An experiment spool as ``python -m trainer.jobs experiment`` writes it: a screen of 1 sample, both arms
    trained 2 steps per seed, every model evaluated on 4 held-out questions; ``leave_out`` stages are absent."""
    out = tmp_path / "out"
    write_lines(out / "questions" / "candidates.jsonl", CANDIDATES)
    write_lines(out / "questions" / "train.jsonl", TRAIN)
    write_lines(out / "questions" / "eval.jsonl", HELD_OUT)
    write_json(out / "index_metadata.json", {"corpus_sha256": "c0ffee"})
    (out / "log.txt").write_text("[    1.0 s] torch 2.13.0, GPU: an accelerator\n[  99.0 s] done\n")
    manifest = {
        "format": "searchlab-experiment-spool",
        "version": 1,
        "id": "7d1c5a52-0000-4000-8000-000000000001",
        "name": "HiPRAG λp 0 vs 0.4",
        "arms": [{"name": arm, "method": "hiprag", "params": {"lambda_p": lp}} for arm, lp in ARMS.items()],
        "baseline": "outcome",
        "seeds": list(seeds),
        "start_model": "/elsewhere/work/start",
        "judge": "evidence",
        "screen": {"samples": 1, "min": 0, "max": 1},
        "split": None,
        "steps": 2,
        "host": "gpu-box",
        "torch": "2.13.0",
        "device": "an accelerator",
        "started_at": "2026-11-27T06:00:00Z",
        "finished_at": None if leave_out else "2026-11-27T06:20:00Z",
        "status": "running" if leave_out else "finished",
        "error": "",
        "phases": {},
    }
    write_json(out / "manifest.json", manifest)
    stages = {"screen-1": ("screen", "screen"), "start-hiprag": ("start", "start_eval")}
    for key, (policy, role) in stages.items():
        if key not in leave_out:
            _evaluation(out, key, policy, role=role)
    for seed in seeds:
        for arm in ARMS:
            if f"train-{arm}-s{seed}" not in leave_out:
                _training(out, arm, seed)
            if f"eval-{arm}-s{seed}" not in leave_out:
                _evaluation(out, f"eval-{arm}-s{seed}", arm, role="eval", arm=arm, seed=seed)
    index.metadata = {"corpus_sha256": "c0ffee"}
    index.save(update_fields=["metadata"])
    return out


def pack(folder: Path, path: Path) -> Path:
    with tarfile.open(path, "w:gz") as archive:
        archive.add(folder, arcname=folder.name)
    return path


def mean(rows: tuple[dict[str, Any], ...], key: str) -> float:
    return sum(float(r[key]) for r in rows) / len(rows)
