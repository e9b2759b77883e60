"""The demo's warm-started SmolLM2: its recipe (:data:`DEMO_RECIPE`), its config and its making, once per recipe.

``manage.py demo`` runs :func:`demo_warm_start_values` as a warm-start run beside the web server; tests and benches
make it in their own process with :func:`ensure_demo_warm_model`. Every name is importable from
:mod:`trainer.warm_start` too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

WARM_MODEL_NAME = "SmolLM2-135M-Instruct-warm"
DEMO_METHODS = ("hiprag", "search_r1")
# The recipe of the demo's warm model: bumped whenever the demonstrations or the demo's warm-start settings change,
# so a model cached by an older recipe is rebuilt instead of reused. 1: 30-word conclusions (format-ok 0.850).
# 2: conclusions of at most 14 words from the hop's own passage, no model turn over the 64-token turn budget
# (HiPRAG 0.950, Search-R1 0.525). 3: Search-R1's turns say where the plan stands; the cached trainer (frozen
# layers and shared prompt prefixes once, the LM head on the model's tokens only) with the top 6 layers trained
# at 5e-4 (HiPRAG 0.825, Search-R1 0.450). 4: Search-R1's turns count their searches ("Search 1 of 2"); the
# cached trainer on the top 8 layers at 4e-4 (HiPRAG 0.950, Search-R1 0.475; docs/warm_start.md has the figures).
# 5: every decoder layer (30 is SmolLM2's count; at or over a model's count it means all of them, the embeddings
# frozen) through the cached trainer, 2 epochs at 4e-4: Search-R1's format needs the lower layers (top 8: 0.475;
# all 30: 0.800-0.900 over 2, 2.5 and 3 epochs), and 2 epochs put its cost at 0.31 of recipe 2's (3: 0.45)
# (HiPRAG 1.000, Search-R1 0.875; 0.700 with seed 1: not yet robust). 6: Search-R1's conclusions of at most 8
# words (trainer.demonstrations.SEARCH_R1_CONCLUSION_WORDS), so its turns fit the 64-token turn budget with room to
# spare and 53-55 of its 56 demonstrations are kept instead of 47-50 (HiPRAG 1.000; Search-R1 0.925, 0.975, 0.975
# with seeds 0, 1, 2, where recipe 5 gave 0.875, 0.700, 0.750).
DEMO_RECIPE = 6
# The demo's data and training settings beyond the defaults.
DEMO_DATA: dict[str, Any] = {}
DEMO_TRAINING: dict[str, Any] = {"trainable_layers": 30, "learning_rate": 4e-4, "epochs": 2.0}


def demo_warm_model_recipe(target: Path) -> int | None:
    """The recipe a finished demo warm model was built with (1 for one from before recipes were recorded), or
    ``None`` when ``target`` holds no finished model."""
    summary = target / "warm_start.json"
    if not (summary.is_file() and (target / "config.json").is_file()):
        return None
    try:
        return int(json.loads(summary.read_text(encoding="utf-8")).get("demo_recipe", 1))
    except (ValueError, TypeError, AttributeError):
        return None


def demo_warm_start_values(
    var_dir: Path, shared_dir: Path | None, *, base: Path | None = None
) -> dict[str, Any]:
    """The config of the demo's warm start (recipe :data:`DEMO_RECIPE`) into ``var_dir/models``.

    Demonstrations come from wiki_multihop's train questions and a BM25 index of its corpus (built here in seconds
    when missing, cached under ``var_dir/retrieval/indexes``) when ``shared_dir`` has them, else from the demo's
    own corpus and questions.
    """
    from retrieval.index import IndexConfig, build_index

    base = base or var_dir / "models" / "SmolLM2-135M-Instruct"
    wiki = shared_dir / "data" / "wiki_multihop" if shared_dir else None
    if wiki and (wiki / "corpus.jsonl").is_file() and (wiki / "questions.jsonl").is_file():
        corpus, questions, name = wiki / "corpus.jsonl", wiki / "questions.jsonl", "wiki_multihop-bm25"
        split = "train"
    else:
        demo = Path(__file__).resolve().parent.parent / "demo"
        corpus, questions, name, split = demo / "corpus.jsonl", demo / "questions.jsonl", "demo-bm25", ""
    index = var_dir / "retrieval" / "indexes" / name
    if not (index / "metadata.json").is_file():
        build_index(corpus, index, IndexConfig(kind="bm25"))
    return {
        "output_dir": str(var_dir / "models" / WARM_MODEL_NAME),
        "index": str(index),
        "model": {"path": str(base)},
        "data": {"path": str(questions), "split": split, **DEMO_DATA},
        # The demo trains HiPRAG against its Search-R1 baseline; each method more costs more minutes.
        "methods": list(DEMO_METHODS),
        "training": dict(DEMO_TRAINING),
        "demo_recipe": DEMO_RECIPE,
    }


def ensure_demo_warm_model(var_dir: Path, shared_dir: Path | None, *, base: Path | None = None) -> Path:
    """The demo's warm-started SmolLM2 under ``var_dir/models``, made once in this process (a finished folder of
    the current :data:`DEMO_RECIPE` is reused; one of an older recipe is rebuilt in place). ``manage.py demo``
    runs the same config as a warm-start run beside the web server instead."""
    from trainer import warm_start  # its names at call time (tests stand in for run and the values there)

    target = var_dir / "models" / WARM_MODEL_NAME
    if demo_warm_model_recipe(target) == DEMO_RECIPE:
        return target
    warm_start.run(
        warm_start.warm_start_config(warm_start.demo_warm_start_values(var_dir, shared_dir, base=base))
    )
    return target
