"""Write the demo's small HiPRAG training run, its judge's verdicts and two annotators' labels (audited by step).

    python demo/make_training_audit_data.py      # rewrites demo/training_hiprag.jsonl, demo/training_audit_labels.jsonl

The run: 12 training steps × 8 trajectories over the demo's 12 questions (``make_demo_data.QUESTIONS``). Early on
the policy searches common knowledge and re-checks facts it already found (over-search); as it trains it searches
less. Its judge (``scripted-judge (training)``, stored as a ``scripted`` judge version) catches those searches
early, but its sensitivity falls as the policy learns to phrase a redundant search as a careful one (“to be
thorough”): the drift an audit by training step shows. Each step's true answer is known here, so the annotators'
labels are written from it: ``ann`` labels every step as the truth says, ``bea`` disagrees on a few steps, and a
researcher (``rey``) adjudicates each disagreement. Lines name a trajectory by its question and training step.

Deterministic: ``random.Random(SEED)``; rerunning writes the same files.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from make_demo_data import PASSAGE_BY_ID, QUESTIONS, _docs  # noqa: E402

SEED = 129
TRAIN_STEPS = 12
PER_STEP = 8
JUDGE = "scripted-judge (training)"
RUN_FILE = "training_hiprag.jsonl"
LABELS_FILE = "training_audit_labels.jsonl"
# The judge: over-search sensitivity falls from 0.95 to 0.5 over training, specificity 0.95; under-search 0.85/0.95.
OVER_SE, OVER_SP, UNDER_SE, UNDER_SP = (0.95, 0.5), 0.95, 0.85, 0.95
BEA_DISAGREES = 0.05  # the second annotator's share of steps answered differently (adjudicated to the truth)


def _lerp(start: float, end: float, fraction: float) -> float:
    return start + (end - start) * fraction


def _search(title: str, reasoning: str) -> str:
    pid = next(p for p, (t, _) in PASSAGE_BY_ID.items() if t == title)
    return (
        "<step>\n"
        f"    <reasoning>{reasoning}</reasoning>\n"
        f"    <search>{title}</search>\n"
        f"    <context>{_docs([pid])}</context>\n"
        f"    <conclusion>{PASSAGE_BY_ID[pid][1].split('. ')[0]}.</conclusion>\n"
        "</step>\n"
    )


def _think(reasoning: str, conclusion: str) -> str:
    return f"<step>\n    <reasoning>{reasoning}</reasoning>\n    <conclusion>{conclusion}</conclusion>\n</step>\n"


def trajectory(
    rng: random.Random, fraction: float, question: tuple[object, ...]
) -> tuple[str, list[tuple[str, bool]]]:
    """The response and each step's (detector, true answer) at ``fraction`` of training."""
    _, _, golds, _, support, needs_search = question
    answer = str(golds[0])  # type: ignore[index]
    titles = [PASSAGE_BY_ID[p][0] for p in support]  # type: ignore[union-attr]
    steps: list[tuple[str, bool]] = []
    parts: list[str] = []
    if needs_search:
        recalled = rng.random() < 0.12  # the second fact from memory: a step that should have searched
        for i, title in enumerate(titles):
            if i == 1 and recalled:
                fact = PASSAGE_BY_ID[support[1]][1].split(". ")[0]  # type: ignore[index]
                parts.append(_think(f"I remember this about {title}.", f"{fact}."))
                steps.append(("under_search", True))
                continue
            parts.append(_search(title, f"I do not know this fact about {title} reliably, so I search."))
            steps.append(("over_search", False))
        if rng.random() < _lerp(0.55, 0.1, fraction):  # re-checking what the agent already found
            why = (
                "Let me double check" if fraction < 0.5 else "To be thorough, I confirm the first fact about"
            )
            parts.append(_search(titles[0], f"{why} {titles[0]}."))
            steps.append(("over_search", True))
        parts.append(_think("Combining the facts I have, I can answer.", f"The answer is {answer}."))
        steps.append(("under_search", False))
    else:
        if rng.random() < _lerp(0.75, 0.15, fraction):  # searching common knowledge
            parts.append(_search(titles[0], f"I search to be sure about {titles[0]}."))
            steps.append(("over_search", True))
            parts.append(_think("The document confirms it.", f"The answer is {answer}."))
        else:
            known = PASSAGE_BY_ID[support[0]][1]  # type: ignore[index]
            parts.append(_think(f"This is common knowledge: {known}", f"The answer is {answer}."))
        steps.append(("under_search", False))
    return "<think>\n" + "".join(parts) + f"</think>\n<answer>{answer}</answer>", steps


def judge(rng: random.Random, fraction: float, detector: str, truth: bool) -> bool:
    se, sp = (_lerp(*OVER_SE, fraction), OVER_SP) if detector == "over_search" else (UNDER_SE, UNDER_SP)
    return rng.random() < (se if truth else 1 - sp)


LABELS = {("over_search", True): "unnecessary", ("over_search", False): "necessary"}
LABELS |= {("under_search", True): "should_search", ("under_search", False): "correct"}
OTHER = {
    "unnecessary": "necessary",
    "necessary": "unnecessary",
    "should_search": "correct",
    "correct": "incorrect",
}


def build(seed: int = SEED) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    rng = random.Random(seed)
    runs: list[dict[str, object]] = []
    labels: list[dict[str, object]] = []
    for step in range(TRAIN_STEPS):
        fraction = step / (TRAIN_STEPS - 1)
        for k in range(PER_STEP):
            question = QUESTIONS[(step * PER_STEP + k) % len(QUESTIONS)]
            qid, dataset = str(question[0]), str(question[3])
            response, truths = trajectory(rng, fraction, question)
            verdicts = [
                {
                    "detector": detector,
                    "step": index,
                    "outcome": "true" if judge(rng, fraction, detector, truth) else "false",
                    "judge_model": JUDGE,
                }
                for index, (detector, truth) in enumerate(truths)
            ]
            runs.append(
                {
                    "question_id": qid,
                    "format": "hiprag",
                    "dataset": dataset,
                    "method": "hiprag",
                    "step": step,
                    "response": response,
                    "verdicts": verdicts,
                }
            )
            for index, key in enumerate(truths):
                where = {"question_id": qid, "training_step": step, "step": index}
                label = LABELS[key]
                labels.append({**where, "annotator": "ann", "label": label})
                if rng.random() < BEA_DISAGREES:
                    labels.append({**where, "annotator": "bea", "label": OTHER[label]})
                    labels.append({**where, "adjudicator": "rey", "label": label, "comment": "as ann"})
                else:
                    labels.append({**where, "annotator": "bea", "label": label})
    return runs, labels


def _write(name: str, rows: list[dict[str, object]]) -> None:
    with (HERE / name).open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")


def main() -> None:
    runs, labels = build()
    _write(RUN_FILE, runs)
    _write(LABELS_FILE, labels)


if __name__ == "__main__":
    main()
