"""An experiment's inputs: question files and datasets (a selection becomes a dataset of its own), an index folder,
the start model and the judge, each checked with an error naming the option at fault."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from django.conf import settings

from agent.judge_spec import EXPERIMENT, JudgeSpec, JudgeSpecError, judge_from_option
from scoring.guessable import guessable
from trainer.config import TINY_MODEL
from webapp.corpora.models import Index
from webapp.corpora.services import corpus_for_file, index_register_ready
from webapp.datasets.models import Dataset, Question
from webapp.datasets.services import dataset_import
from webapp.experiments.specs import ExperimentConfigError


def experiments_dir() -> Path:
    return Path(getattr(settings, "EXPERIMENTS_DIR", Path(settings.VAR_DIR) / "experiments"))


def experiment_dir(experiment_id: int) -> Path:
    return experiments_dir() / str(experiment_id)


def read_question_file(path: str | Path) -> list[dict[str, Any]]:
    """FlashRAG JSONL rows, read as the trainer reads them; errors name the file and line."""
    from trainer.config import ConfigError
    from trainer.train import read_question_rows

    try:
        return read_question_rows(path)
    except ConfigError as exc:
        raise ExperimentConfigError("questions", str(exc).split(": ", 1)[-1]) from None


def dataset_rows(dataset: Dataset) -> list[dict[str, Any]]:
    """A stored dataset's questions as FlashRAG rows, in import order."""
    rows = []
    for q in Question.objects.filter(dataset=dataset).order_by("pk").iterator():
        metadata = {**(q.metadata or {}), **({"data_source": q.data_source} if q.data_source else {})}
        rows.append(
            {
                "id": q.external_id,
                "question": q.text,
                "golden_answers": q.golden_answers,
                "metadata": metadata,
            }
        )
    return rows


def select_rows(
    rows: Iterable[Mapping[str, Any]], *, split: str = "", limit: int = 0, drop_guessable: bool = False
) -> list[dict[str, Any]]:
    """The rows whose ``metadata.split`` starts with ``split`` (all when empty), without those whose answer can be
    guessed without evidence when ``drop_guessable`` (yes/no, or named among the question's options:
    :func:`scoring.guessable.guessable`), the first ``limit`` (0: all)."""
    in_split = [
        dict(row)
        for row in rows
        if not split or str((row.get("metadata") or {}).get("split", "")).startswith(split)
    ]
    chosen = [
        row
        for row in in_split
        if not (drop_guessable and guessable(str(row["question"]), row.get("golden_answers") or []))
    ]
    if in_split and not chosen:  # name the option that emptied the selection, not the dataset it would make
        raise ExperimentConfigError(
            "train_drop_guessable", f"all {len(in_split)} questions of the split are guessable; none is left"
        )
    return chosen[:limit] if limit else chosen


def train_label(drop_guessable: bool) -> str:
    """The training dataset's label, which its name carries: what was left out shows in the name."""
    return "train-unguessable" if drop_guessable else "train"


def experiment_dataset(*, rows: Sequence[Mapping[str, Any]], label: str) -> Dataset:
    """A dataset of exactly these rows, named by their content: the same selection is the same dataset (reused)."""
    if not rows:
        raise ExperimentConfigError(label, "no question left after the split and limit")
    digest = hashlib.sha256(
        json.dumps([[r.get("id"), r["question"]] for r in rows], ensure_ascii=False).encode()
    ).hexdigest()[:10]
    name = f"experiment-{label}-{len(rows)}-{digest}"
    found = Dataset.objects.filter(name=name).first()
    if found is not None:
        return found
    folder = experiments_dir() / "datasets"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.jsonl"
    with path.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    return dataset_import(name=name, path=path)


def index_for_folder(path: str | Path) -> Index:
    """The ready Index row of an index folder built by ``retrieval.index.build_index``, registered when new (under a
    corpus row named after the corpus file; its passages are read from that file, not imported)."""
    from retrieval.index import IndexMetadata, RetrievalIndexError

    folder = Path(path).resolve()
    found = Index.objects.filter(path=str(folder)).order_by("-pk").first()
    if found is not None:
        if found.status != Index.Status.READY:
            raise ExperimentConfigError("index", f"index {found} is {found.status}, not ready")
        return found
    try:
        metadata = IndexMetadata.read(folder)
    except (RetrievalIndexError, OSError, ValueError, TypeError) as exc:
        raise ExperimentConfigError("index", str(exc)) from None
    corpus = corpus_for_file(path=metadata.corpus_path)
    return index_register_ready(corpus=corpus, folder=folder)


def default_model() -> Path:
    """The warm-started SmolLM2 (trainer.warm_start.WARM_MODEL_NAME under VAR_DIR/models)."""
    from webapp.training.config import WARM_MODEL_DIR

    return Path(settings.VAR_DIR) / WARM_MODEL_DIR


def resolve_model(value: str | None) -> str:
    """A start model folder (absolute), or the tiny random model; the default is the warm start, never silently
    something else."""
    if value == TINY_MODEL:
        return value
    if not value:
        folder = default_model()
        if not (folder / "config.json").is_file():
            raise ExperimentConfigError(
                "model",
                f"the warm-started SmolLM2 is not at {folder}: run `make demo` (or `python -m trainer.warm_start "
                "CONFIG`) to make it, or pass a model folder",
            )
        return str(folder)
    folder = Path(value) if Path(value).is_absolute() else Path(settings.BASE_DIR) / value
    if not (folder / "config.json").is_file():
        raise ExperimentConfigError("model", f"{value} is not a transformers model folder (no config.json)")
    return str(folder.resolve())


def judge_choice(value: str, *, model: str = "", api_key_env: str = "", base_url: str = "") -> JudgeSpec:
    """A kind an experiment offers (agent.judge_spec.KINDS) or an OpenAI-compatible base URL."""
    try:
        return judge_from_option(
            value, use=EXPERIMENT, model=model, api_key_env=api_key_env, base_url=base_url
        )
    except JudgeSpecError as exc:
        raise ExperimentConfigError("judge", exc.message) from None
