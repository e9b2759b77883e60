"""Agreement of HiPRAG's re-ask over-search test with the evidence judge (and with the demo's team labels).

    python bench/judge_agreement.py [--wiki 40] [--model PATH] [--llm-judge] [--endpoint URL --endpoint-model M]

Two samples of HiPRAG trajectories, every search step judged by both judges:

* **demo** — the 12 team-written HiPRAG trajectories of ``demo/`` (their over-search steps carry the team's labels,
  ``team-labels``), with the questions' supporting titles;
* **wiki** — ``--wiki N`` wiki_multihop questions (a fixed seed) as HiPRAG demonstrations written through the real
  rollout loop and the BM25 index (``trainer.demonstrations``: one search per supporting title, the conclusion
  taken from what BM25 returned), so BM25's misses are in the sample as they are in training.

The evidence judge gives each step a verdict and its rule (``scoring.judging.evidence``); the re-ask judge re-asks
each query to the policy without retrieval and compares the answer with the step's conclusion
(``agent.judges.hiprag_over_search``): lexically by default, and with ``--llm-judge`` also by Fig. 5's prompt on
the policy itself (the CPU's only LLM), or on ``--endpoint`` (an OpenAI-compatible server). Printed: per sample
and judge the flag rate, the pairwise percent agreement, Cohen's κ and Gwet's AC1 (``scoring.agreement``), the
same against the evidence judge without its retrieval-miss rule, the re-ask flag rate per evidence rule, and the
re-ask judges' errors and unparseable replies. ``--json PATH`` writes everything.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
CACHE = Path(os.environ.get("SEARCHLAB_MODEL_CACHE", Path.home() / ".cache" / "searchlab"))
SMOLLM2 = CACHE / "models" / "SmolLM2-135M-Instruct"
INDEX = CACHE / "retrieval" / "indexes" / "wiki_multihop-bm25"
SHARED = Path(os.environ.get("SEARCHLAB_SHARED_DIR", REPO.parent / "shared"))
WIKI_QUESTIONS = SHARED / "data" / "wiki_multihop" / "questions.jsonl"


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def demo_sample() -> list[dict[str, Any]]:
    """The demo's HiPRAG trajectories: parsed trajectory, supporting titles, team labels by step index."""
    from scoring.formats import parse

    questions = {row["id"]: row for row in _jsonl(REPO / "demo" / "questions.jsonl")}
    items = []
    for row in _jsonl(REPO / "demo" / "trajectories_hiprag.jsonl"):
        trajectory = parse("hiprag", row["response"])
        if not trajectory.valid:
            continue
        meta = questions[row["question_id"]].get("metadata") or {}
        labels = {
            v["step"]: v["outcome"] == "true"
            for v in row.get("verdicts", [])
            if v["detector"] == "over_search"
        }
        items.append(
            {"id": row["question_id"], "trajectory": trajectory, "titles": meta.get("supporting_titles", [])}
            | {"labels": labels}
        )
    return items


def wiki_sample(n: int, tokenizer: Any, seed: int = 21) -> list[dict[str, Any]]:
    """``n`` wiki_multihop questions as HiPRAG demonstrations over BM25 (valid ones only)."""
    from retrieval.api import searcher_for_index
    from trainer.demonstrations import build_demonstrations, plan_for

    rows = _jsonl(WIKI_QUESTIONS)
    random.Random(seed).shuffle(rows)
    plans, titles = [], {}
    for row in rows:
        plan = plan_for(row)
        if plan is None or not plan.hops:
            continue
        plans.append(plan)
        titles[plan.question.id] = list((row.get("metadata") or {}).get("supporting_titles") or [])
        if len(plans) == n:
            break
    demonstrations = build_demonstrations("hiprag", plans, searcher_for_index(str(INDEX)), tokenizer)
    from scoring.formats import parse

    items = []
    for demo in demonstrations:
        if demo.valid:
            trajectory = parse("hiprag", demo.rollout.text)
            items.append(
                {"id": demo.question_id, "trajectory": trajectory, "titles": titles[demo.question_id]}
            )
    return items


def agreement(pairs: list[tuple[bool | None, bool | None]]) -> dict[str, Any]:
    from scoring.agreement import cohen_kappa, gwet_ac1, percent_agreement

    kappa, ac1 = cohen_kappa(pairs), gwet_ac1(pairs, (True, False))
    usable = [(a, b) for a, b in pairs if a is not None and b is not None]
    return {
        "n": len(usable),
        "percent": percent_agreement(pairs),
        "kappa": kappa.value,
        "kappa_reason": kappa.reason,
        "ac1": ac1.value,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--wiki", type=int, default=40, help="wiki_multihop questions (0: the demo only)")
    parser.add_argument("--model", type=Path, default=SMOLLM2, help="the policy that is re-asked")
    parser.add_argument("--llm-judge", action="store_true", help="also judge equivalence by Fig. 5's prompt")
    parser.add_argument("--endpoint", default="", help="an OpenAI-compatible base URL for the LLM judge")
    parser.add_argument("--endpoint-model", default="", help="the model the endpoint serves")
    parser.add_argument(
        "--reask-endpoint", action="store_true", help="re-ask the endpoint instead of the policy"
    )
    parser.add_argument("--json", type=Path, help="write every figure here")
    args = parser.parse_args(argv)

    from agent.backend_transformers import TransformersBackend
    from agent.judge_client import JudgeEndpoint, OpenAIJudge, TransformersJudge
    from agent.judges import hiprag_over_search
    from scoring.judging import evidence
    from scoring.verdicts import Verdict

    started = time.perf_counter()
    policy = TransformersBackend.from_pretrained(str(args.model), threads=2)
    samples = {"demo": demo_sample()}
    if args.wiki:
        samples["wiki"] = wiki_sample(args.wiki, policy.tokenizer)
    judges: dict[str, Any] = {"reask-lexical": None}
    endpoint = None
    if args.endpoint:
        endpoint = OpenAIJudge(
            JudgeEndpoint(base_url=args.endpoint, model=args.endpoint_model, timeout=120.0)
        )
        judges[f"reask-llm ({args.endpoint_model})"] = endpoint
    elif args.llm_judge:
        judges[f"reask-llm ({policy.name})"] = TransformersJudge(policy, max_new_tokens=48)
    report: dict[str, Any] = {"model": str(args.model), "samples": {}}
    for name, items in samples.items():
        trajectories = [item["trajectory"] for item in items]
        findings = [evidence.over_search_findings(item["trajectory"], item["titles"]) for item in items]
        out: dict[str, Any] = {"trajectories": len(items), "search_steps": sum(len(f) for f in findings)}
        ev = [f.verdict is Verdict.TRUE for fs in findings for f in fs.values()]
        ev_redundant = [
            f.verdict is Verdict.TRUE and f.rule not in evidence.RETRIEVAL_MISS_RULES
            for fs in findings
            for f in fs.values()
        ]
        rules = [f.rule or "-" for fs in findings for f in fs.values()]
        out["evidence"] = {"flag_rate": sum(ev) / len(ev) if ev else None, "rules": dict(Counter(rules))}
        out["evidence_redundant_flag_rate"] = sum(ev_redundant) / len(ev) if ev else None
        labels = [item.get("labels", {}).get(i) for item, fs in zip(items, findings, strict=True) for i in fs]
        if any(label is not None for label in labels):
            out["team_labels"] = {
                "n": sum(label is not None for label in labels),
                "flag_rate": sum(bool(label) for label in labels)
                / max(1, sum(x is not None for x in labels)),
                "evidence": agreement(list(zip(ev, labels, strict=True))),
            }
        for judge_name, judge in judges.items():
            t0 = time.perf_counter()
            regenerator = endpoint if (args.reask_endpoint and endpoint is not None) else None
            results = asyncio.run(
                hiprag_over_search(policy, judge, trajectories, batch_size=16, regenerator=regenerator)
            )
            by_step = [{r.step_index: r for r in row} for row in results]
            verdicts = [by_step[t].get(i) for t, fs in enumerate(findings) for i in fs]
            flags: list[bool | None] = [
                None if v is None or not v.verdict or not v.verdict.usable else v.verdict is Verdict.TRUE
                for v in verdicts
            ]
            usable = [f for f in flags if f is not None]
            per_rule: dict[str, list[int]] = {}
            for rule, flag in zip(rules, flags, strict=True):
                if flag is not None:
                    per_rule.setdefault(rule, [0, 0])[0] += flag
                    per_rule.setdefault(rule, [0, 0])[1] += 1
            entry = {
                "seconds": round(time.perf_counter() - t0, 1),
                "flag_rate": sum(usable) / len(usable) if usable else None,
                "outcomes": dict(
                    Counter(v.verdict.value if v and v.verdict else "missing" for v in verdicts)
                ),
                "vs_evidence": agreement(list(zip(flags, ev, strict=True))),
                "vs_evidence_without_misses": agreement(list(zip(flags, ev_redundant, strict=True))),
                "flag_rate_by_evidence_rule": {r: f"{k}/{n}" for r, (k, n) in sorted(per_rule.items())},
                "examples": [
                    {"query": trajectories[t].steps[v.step_index].query, "regenerated": v.regenerated}
                    for t, row in enumerate(results)
                    for v in row[:1]
                    if v.step_index is not None
                ][:3],
            }
            entry["flagged"] = [
                {
                    "query": trajectories[t].steps[v.step_index].query,
                    "conclusion": trajectories[t].steps[v.step_index].conclusion,
                    "regenerated": v.regenerated,
                }
                for t, row in enumerate(results)
                for v in row
                if v.step_index is not None and v.verdict is Verdict.TRUE
            ][:5]
            if "team_labels" in out:
                entry["vs_team_labels"] = agreement(list(zip(flags, labels, strict=True)))
            out[judge_name] = entry
        report["samples"][name] = out
    report["seconds"] = round(time.perf_counter() - started, 1)
    text = json.dumps(report, indent=2, default=str)
    print(text)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
