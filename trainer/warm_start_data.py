"""The warm start's questions: FlashRAG rows read with errors naming the line, and each method's demonstration plans
drawn from them (:func:`choose_plans`)."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainer.config import ConfigError

if TYPE_CHECKING:
    from trainer.warm_start_config import WarmStartConfig

COMMON_KNOWLEDGE = Path(__file__).resolve().parent.parent / "demo" / "common_knowledge.jsonl"


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """FlashRAG question rows; a bad line is an error naming the file and line."""
    rows = []
    with Path(path).open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                for required in ("question", "golden_answers"):
                    if required not in row:
                        raise KeyError(required)
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                raise ConfigError(
                    "data.path", f"{path}:{number}: not a FlashRAG question row ({exc})"
                ) from None
            rows.append(row)
    return rows


def choose_plans(
    config: WarmStartConfig, rows: Sequence[dict[str, Any]], common: Sequence[dict[str, Any]]
) -> dict[str, list[Any]]:
    """Per method: ``questions_per_method`` search plans and their share of no-search plans, drawn with the seed
    from disjoint questions (a question teaches one method, so more questions are seen)."""
    from trainer.demonstrations import needs_search, plan_for

    split = config.data.split
    chosen = [
        r for r in rows if not split or str((r.get("metadata") or {}).get("split", "")).startswith(split)
    ]
    searched = [
        p
        for r in chosen
        if needs_search(r) and (p := plan_for(r)) is not None and 0 < len(p.hops) < config.max_turns
    ]
    direct = [p for r in [*chosen, *common] if not needs_search(r) and (p := plan_for(r)) is not None]
    rng = random.Random(config.training.seed)
    rng.shuffle(searched)
    rng.shuffle(direct)
    share = config.data.no_search_share
    n_direct = max(1, round(config.data.questions_per_method * share / (1 - share))) if share else 0
    plans: dict[str, list[Any]] = {}
    for i, method in enumerate(config.methods):
        mine = searched[i * config.data.questions_per_method : (i + 1) * config.data.questions_per_method]
        if len(mine) < config.data.questions_per_method:
            mine = searched[
                : config.data.questions_per_method
            ]  # fewer questions than methods × N: share them
        # No-search questions are few: every method sees them (rotated so each gets a different first few).
        extra = (
            [direct[(i * n_direct + j) % len(direct)] for j in range(min(n_direct, len(direct)))]
            if direct
            else []
        )
        plans[method] = [*_with_redundant(config, mine, rng), *extra]
    return plans


def _with_redundant(config: WarmStartConfig, plans: list[Any], rng: random.Random) -> list[Any]:
    """``data.redundant_search_share`` of ``plans`` (a seeded choice among those whose turn budget has room for one
    search more) given a redundant last search, the two kinds taking turns."""
    from trainer.demonstrations import REDUNDANT_KINDS, with_redundant_search

    share = config.data.redundant_search_share
    room = [i for i, p in enumerate(plans) if len(p.hops) + 1 < config.max_turns]
    if not share or not room:
        return list(plans)
    chosen = sorted(rng.sample(room, min(len(room), round(share * len(plans)))))
    out = list(plans)
    for n, i in enumerate(chosen):
        out[i] = with_redundant_search(plans[i], REDUNDANT_KINDS[n % len(REDUNDANT_KINDS)])
    return out
