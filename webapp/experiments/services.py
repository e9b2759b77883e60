"""Writes of experiments: their inputs (question subsets, an index folder), creation, and execution to the end.

Execution is a fixed list of stages (:func:`experiment_stages`): the start model evaluated in every method's
format, then per method (the baseline first) a training run and the evaluation of the model it saved. Each stage is
an ordinary run made by the project's own services — a train run supervised by ``webapp.training.supervisor``
(``python -m trainer.train CONFIG`` as a subprocess, metrics and samples ingested), an eval run executed by
``webapp.evaluation.services`` — linked to the experiment by an :class:`ExperimentRun` row.

Resuming is executing again: a stage whose run finished is reused; a stage whose run did not finish (the process
was killed, the trainer crashed) gets a new run, the old one is marked crashed (its orphaned trainer, if still
alive on this machine, is killed first). Every method trains from the same start model with the same questions in
the same order and the same seed (the trainer seeds torch, the data order and sampling from ``training.seed``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import signal
import socket
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from trainer.config import TINY_MODEL, ConfigError, LoggingConfig, PPOConfig
from webapp.corpora.models import Corpus, Index
from webapp.datasets.models import Dataset, Question
from webapp.datasets.services import dataset_import
from webapp.evaluation.services import evaluation_run_create, evaluation_run_execute
from webapp.evaluation.specs import EvaluationConfigError, EvaluationSpec, JudgeSpec
from webapp.experiments.models import Experiment, ExperimentRun
from webapp.experiments.specs import (
    CONFIG_FIELDS,
    ExperimentConfigError,
    ExperimentSpec,
    JudgeChoice,
    experiment_spec_check,
)
from webapp.runs.models import Run
from webapp.runs.services import run_create, run_mark_finished
from webapp.training.config import build_config, judge_option
from webapp.training.models import TrainingProcess
from webapp.training.services import QUESTIONS_FILE, run_dir_for

logger = logging.getLogger(__name__)
LOG_TAIL_LINES = 60
START_MODEL_DIR = "start-model"
Say = Callable[[str], None]


class ExperimentBusy(RuntimeError):
    """Another live process is executing the experiment."""


def experiments_dir() -> Path:
    return Path(getattr(settings, "EXPERIMENTS_DIR", Path(settings.VAR_DIR) / "experiments"))


def experiment_dir(experiment_id: int) -> Path:
    return experiments_dir() / str(experiment_id)


# --- Inputs ----------------------------------------------------------------------------------------------------


def read_question_file(path: str | Path) -> list[dict[str, Any]]:
    """FlashRAG JSONL rows ({"id", "question", "golden_answers", "metadata"}); errors name the file and line."""
    path = Path(path)
    if not path.is_file():
        raise ExperimentConfigError("questions", f"{path} does not exist")
    rows = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                if "question" not in row or "golden_answers" not in row:
                    raise KeyError("question" if "question" not in row else "golden_answers")
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                raise ExperimentConfigError(
                    "questions", f"{path}:{number}: not a FlashRAG question row ({exc})"
                ) from None
            row.setdefault("id", str(number))
            rows.append(row)
    return rows


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
    rows: Iterable[Mapping[str, Any]], *, split: str = "", limit: int = 0
) -> list[dict[str, Any]]:
    """The rows whose ``metadata.split`` starts with ``split`` (all when empty), the first ``limit`` (0: all)."""
    chosen = [
        dict(row)
        for row in rows
        if not split or str((row.get("metadata") or {}).get("split", "")).startswith(split)
    ]
    return chosen[:limit] if limit else chosen


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
    from retrieval.index import IndexMetadata, RetrievalIndexError, index_size_bytes

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
    corpus = Corpus.objects.filter(source_path=metadata.corpus_path).order_by("pk").first()
    if corpus is None:
        base = f"{Path(metadata.corpus_path).parent.name or 'corpus'}-{Path(metadata.corpus_path).stem}"
        name, n = base, 1
        while Corpus.objects.filter(name=name).exists():
            n += 1
            name = f"{base}-{n}"
        corpus = Corpus.objects.create(name=name, source_path=metadata.corpus_path, passage_count=0)
    name, n = folder.name, 1
    while Index.objects.filter(corpus=corpus, name=name).exists():
        n += 1
        name = f"{folder.name}-{n}"
    return Index.objects.create(
        corpus=corpus,
        name=name,
        kind=metadata.kind,
        encoder="" if metadata.kind == "bm25" else metadata.encoder,
        path=str(folder),
        status=Index.Status.READY,
        progress=1.0,
        build_seconds=metadata.build_seconds,
        size_bytes=index_size_bytes(folder),
        metadata=asdict(metadata),
        finished_at=timezone.now(),
    )


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


def judge_choice(value: str, *, model: str = "", api_key_env: str = "") -> JudgeChoice:
    """``evidence``, ``none``, ``policy`` or an OpenAI-compatible base URL."""
    if value in ("evidence", "none", "policy"):
        return JudgeChoice(kind=value)
    if value.startswith(("http://", "https://")):
        return JudgeChoice(kind="openai", base_url=value, model=model, api_key_env=api_key_env)
    raise ExperimentConfigError("judge", "evidence, none, policy, or an http(s):// base URL")


# --- Creation --------------------------------------------------------------------------------------------------


@transaction.atomic
def experiment_create(
    *, user: AbstractBaseUser | None, spec: ExperimentSpec, name: str = "", enqueue: bool = True
) -> Experiment:
    """A pending experiment; its task (on the ``train`` queue) is queued once the transaction commits."""
    experiment_spec_check(spec)
    for field, model, pk in (
        ("train_questions", Dataset, spec.train_dataset_id),
        ("eval_questions", Dataset, spec.eval_dataset_id),
        ("index", Index, spec.index_id),
    ):
        if not model.objects.filter(pk=pk).exists():
            raise ExperimentConfigError(field, f"no {model.__name__.lower()} {pk}")
    training_config_check(spec)
    experiment = Experiment.objects.create(
        name=name or f"{' vs '.join(spec.ordered_methods())} · {spec.steps} steps · seed {spec.seed}",
        spec=spec.to_json(),
        created_by=user,
    )
    if enqueue:
        transaction.on_commit(lambda: _enqueue(experiment.pk))
    return experiment


def _enqueue(experiment_id: int) -> None:
    from webapp.experiments.tasks import experiment_run_task

    experiment_run_task.delay(experiment_id)


@transaction.atomic
def experiment_resume_request(*, experiment_id: int) -> Experiment:
    """Queue a failed or interrupted experiment again (its finished stages are reused)."""
    experiment = Experiment.objects.select_for_update().get(pk=experiment_id)
    if experiment.status == Experiment.Status.FAILED:
        experiment.status = Experiment.Status.PENDING
        experiment.save(update_fields=["status"])
        transaction.on_commit(lambda: _enqueue(experiment_id))
    return experiment


# --- Execution -------------------------------------------------------------------------------------------------


def experiment_stages(spec: ExperimentSpec) -> list[tuple[str, str]]:
    """(role, method) in execution order: the start model in every method's format, then train → evaluate per
    method, the baseline first."""
    methods = spec.ordered_methods()
    stages = [(ExperimentRun.Role.START_EVAL.value, m) for m in methods]
    for method in methods:
        stages += [(ExperimentRun.Role.TRAIN.value, method), (ExperimentRun.Role.EVAL.value, method)]
    return stages


def _alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _log(experiment_id: int, line: str, say: Say | None = None) -> None:
    now = timezone.now()
    if say is not None:
        say(line)
    else:
        logger.info("experiment %s: %s", experiment_id, line)
    with transaction.atomic():
        experiment = Experiment.objects.select_for_update().only("log_tail").get(pk=experiment_id)
        lines = [*experiment.log_tail.splitlines(), f"{now:%H:%M:%S} {line}"][-LOG_TAIL_LINES:]
        Experiment.objects.filter(pk=experiment_id).update(log_tail="\n".join(lines), heartbeat_at=now)


@transaction.atomic
def _claim(experiment_id: int) -> Experiment:
    experiment = Experiment.objects.select_for_update().get(pk=experiment_id)
    here = socket.gethostname()
    if (
        experiment.status == Experiment.Status.RUNNING
        and experiment.pid != os.getpid()
        and (experiment.hostname != here or _alive(experiment.pid))
    ):
        raise ExperimentBusy(
            f"experiment #{experiment_id} is being executed by process {experiment.pid} on {experiment.hostname}"
        )
    experiment.status = Experiment.Status.RUNNING
    experiment.hostname, experiment.pid, experiment.error = here, os.getpid(), ""
    experiment.started_at = experiment.started_at or timezone.now()
    experiment.heartbeat_at = timezone.now()
    experiment.finished_at = None
    experiment.save()
    return experiment


def _finish(experiment_id: int, status: str, error: str = "") -> Experiment:
    Experiment.objects.filter(pk=experiment_id).update(
        status=status, error=error, finished_at=timezone.now(), pid=None
    )
    return Experiment.objects.get(pk=experiment_id)


def _start_model(experiment: Experiment, spec: ExperimentSpec) -> str:
    """The start model's folder. The tiny random model is saved once per experiment, so every method and every
    evaluation starts from the very same weights."""
    if spec.model != TINY_MODEL:
        return spec.model
    folder = experiment_dir(experiment.pk) / START_MODEL_DIR
    if not (folder / "config.json").is_file():
        from trainer.models import tiny_model, tiny_tokenizer

        tokenizer = tiny_tokenizer()
        partial = folder.with_name(folder.name + ".partial")
        tiny_model(tokenizer, seed=spec.seed).save_pretrained(partial)
        tokenizer.save_pretrained(partial)
        partial.rename(folder)
    return str(folder)


def _abandon(run: Run, experiment_id: int) -> None:
    """A stage's unfinished run: kill its orphaned trainer (this machine only) and mark it crashed."""
    if run.kind in Run.SUPERVISED_KINDS:
        process = TrainingProcess.objects.filter(run_id=run.pk).first()
        if process is not None and process.hostname == socket.gethostname() and _alive(process.pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
    if run.is_active:
        run_mark_finished(
            run_id=run.pk,
            status=Run.Status.CRASHED,
            error=f"interrupted; experiment #{experiment_id} restarted this stage as a new run",
        )


def _training_values(spec: ExperimentSpec, method: str, model: str, index: Index) -> dict[str, Any]:
    """The new-run form's cleaned data for one method (webapp.training.config.build_config reads it)."""
    ppo, logging_ = PPOConfig(), LoggingConfig()
    judge = spec.judge
    return {
        "method": method,
        "algorithm": spec.algorithm,
        "model_path": model,
        "lora": False,
        "trainable_layers": spec.trainable_layers,
        "question_limit": 0,  # the experiment's training dataset holds exactly the chosen questions
        "rollout": "agent",
        "index": index,
        "judge": "endpoint" if judge.kind == "openai" else judge.kind,
        "judge_base_url": judge.base_url,
        "judge_model": judge.model,
        "judge_api_key_env": judge.api_key_env,
        "lambda_f": None,
        "lambda_p": None,
        "reward_params": {},
        "max_turns": spec.max_turns,
        "max_turn_tokens": spec.max_turn_tokens,
        "max_rollout_tokens": spec.max_rollout_tokens,
        "max_obs_tokens": spec.max_obs_tokens,
        "topk": spec.topk,
        "max_steps": spec.steps,
        "learning_rate": spec.learning_rate,
        "num_generations": spec.num_generations,
        "per_device_train_batch_size": spec.batch_size,
        "gradient_accumulation_steps": 1,
        "num_iterations": 1,
        "max_completion_length": spec.max_completion_length,
        "beta": 0.0,
        "epsilon": 0.2,
        "temperature": spec.temperature,
        "loss_type": "grpo",
        "seed": spec.seed,
        "critic_learning_rate": ppo.critic_learning_rate,
        "gamma": ppo.gamma,
        "lam": ppo.lam,
        "vf_coef": ppo.vf_coef,
        "sample_every": spec.sample_every,
        "samples_per_log": logging_.samples_per_log,
    }


def training_config_check(spec: ExperimentSpec) -> None:
    """Build every method's trainer config once (trainer.config's rules), before anything runs."""
    experiment_spec_check(spec)
    index = Index.objects.get(pk=spec.index_id)
    for method in spec.methods:
        try:
            build_config(
                _training_values(spec, method, spec.model, index), output_dir="(checked)", data_path="-"
            )
        except ConfigError as exc:
            field = CONFIG_FIELDS.get(exc.field, exc.field.rsplit(".", 1)[-1])
            raise ExperimentConfigError(field, f"{method}: {str(exc).split(': ', 1)[-1]}") from None


def _create_train_run(experiment: Experiment, spec: ExperimentSpec, method: str, model: str) -> Run:
    """A pending train run as webapp.training.services.training_run_create makes it, supervised here instead of by
    a Celery task."""
    index = Index.objects.get(pk=spec.index_id)
    values = _training_values(spec, method, model, index)
    run = run_create(
        name=f"exp{experiment.pk} train · {method}",
        method=method,
        model_name=model,
        kind=Run.Kind.TRAIN,
        algorithm=spec.algorithm,
        dataset_id=spec.train_dataset_id,
        created_by=experiment.created_by,
    )
    folder = run_dir_for(run.pk)
    run.config = build_config(
        values, output_dir=str(folder / "output"), data_path=str(folder / QUESTIONS_FILE)
    )
    run.index = index
    run.judge_settings = {"judge": judge_option(values)}
    run.save(update_fields=["config", "index", "judge_settings"])
    TrainingProcess.objects.create(run=run, run_dir=str(folder))
    return run


def _evaluation_spec(spec: ExperimentSpec, method: str, model: str) -> EvaluationSpec:
    judge = spec.judge
    return EvaluationSpec(
        method=method,
        model=model,
        dataset_ids=(spec.eval_dataset_id,),
        index_id=spec.index_id,
        judge=JudgeSpec(
            kind=judge.kind, base_url=judge.base_url, model=judge.model, api_key_env=judge.api_key_env
        ),
        # The training budgets: the models are evaluated in the conditions they were trained in.
        rollout={
            "max_turns": spec.max_turns,
            "max_new_tokens": spec.max_turn_tokens,
            "max_rollout_tokens": spec.max_rollout_tokens,
            "max_obs_tokens": spec.max_obs_tokens,
            "topk": spec.topk,
            "seed": spec.seed,
        },
        batch_size=spec.eval_batch_size,
        backend=spec.eval_engine,
    )


def _link(experiment: Experiment, role: str, method: str) -> ExperimentRun | None:
    return (
        ExperimentRun.objects.filter(experiment=experiment, role=role, method=method)
        .select_related("run")
        .first()
    )


@transaction.atomic
def _attach(experiment: Experiment, role: str, method: str, position: int, run: Run) -> None:
    link = (
        ExperimentRun.objects.select_for_update()
        .filter(experiment=experiment, role=role, method=method)
        .first()
    )
    if link is None:
        ExperimentRun.objects.create(
            experiment=experiment, role=role, method=method, position=position, run=run
        )
    else:
        link.run, link.attempts, link.position = run, link.attempts + 1, position
        link.save(update_fields=["run", "attempts", "position"])


def _run_stage(
    experiment: Experiment,
    spec: ExperimentSpec,
    role: str,
    method: str,
    position: int,
    start_model: str,
    say: Say | None,
) -> Run:
    if role == ExperimentRun.Role.TRAIN:
        with transaction.atomic():
            run = _create_train_run(experiment, spec, method, start_model)
            _attach(experiment, role, method, position, run)
        _log(experiment.pk, f"training {method} from {start_model}: run #{run.pk}, {spec.steps} steps", say)
        from webapp.training.supervisor import supervise

        supervise(run.pk)
        run = Run.objects.get(pk=run.pk)
        if (
            run.status == Run.Status.FINISHED
            and not (Path(run.config["output_dir"]) / "config.json").is_file()
        ):
            return run_mark_finished(
                run_id=run.pk, status=Run.Status.FAILED, error="the trainer saved no model"
            )
        return run
    if role == ExperimentRun.Role.START_EVAL:
        model, base_run_id, label = start_model, None, "start"
    else:
        train = _link(experiment, ExperimentRun.Role.TRAIN, method)
        assert train is not None  # its stage came first
        model, label = str(train.run.config["output_dir"]), "trained"
        # The baseline's trained model is compared with its start, every other method with the trained baseline.
        base = _link(
            experiment,
            ExperimentRun.Role.START_EVAL if method == spec.baseline else ExperimentRun.Role.EVAL,
            method if method == spec.baseline else spec.baseline,
        )
        base_run_id = base.run_id if base is not None else None
    with transaction.atomic():
        run = evaluation_run_create(
            user=experiment.created_by,
            spec=_evaluation_spec(spec, method, model),
            name=f"exp{experiment.pk} {label} · {method}",
            base_run_id=base_run_id,
            enqueue=False,
        )
        _attach(experiment, role, method, position, run)
    _log(experiment.pk, f"evaluating the {label} model in {method}'s format: run #{run.pk}", say)
    return evaluation_run_execute(run_id=run.pk)


def experiment_store_result(*, experiment_id: int) -> dict[str, Any]:
    """Recompute the table and the paired-bootstrap differences from the finished runs, and store them."""
    from webapp.experiments.selectors import experiment_result

    experiment = Experiment.objects.get(pk=experiment_id)
    result = experiment_result(experiment=experiment)
    Experiment.objects.filter(pk=experiment_id).update(result=result)
    return result


def experiment_execute(*, experiment_id: int, say: Say | None = None) -> Experiment:
    """Execute (or resume) an experiment to its end; returns it finished, or failed with the reason. Raises
    :class:`ExperimentBusy` when another live process executes it; an interruption (KeyboardInterrupt, SystemExit)
    marks it failed and propagates."""
    experiment = _claim(experiment_id)
    spec = ExperimentSpec.from_json(experiment.spec)
    stages = experiment_stages(spec)
    try:
        experiment_spec_check(spec)
        start_model = _start_model(experiment, spec)
        for position, (role, method) in enumerate(stages):
            link = _link(experiment, role, method)
            if link is not None and link.run.status == Run.Status.FINISHED:
                _log(
                    experiment_id,
                    f"stage {position + 1}/{len(stages)} {role} {method}: run #{link.run_id} reused",
                    say,
                )
                continue
            if link is not None:
                _log(
                    experiment_id,
                    f"stage {position + 1}/{len(stages)} {role} {method}: run #{link.run_id} "
                    f"{link.run.status}, restarting it",
                    say,
                )
                _abandon(link.run, experiment_id)
            run = _run_stage(experiment, spec, role, method, position, start_model, say)
            if run.status != Run.Status.FINISHED:
                error = f"stage {role} {method}: run #{run.pk} {run.status}: {run.error}".strip()
                _log(experiment_id, error, say)
                return _finish(experiment_id, Experiment.Status.FAILED, error)
            _log(
                experiment_id,
                f"stage {position + 1}/{len(stages)} {role} {method}: run #{run.pk} finished",
                say,
            )
            if role != ExperimentRun.Role.TRAIN:
                experiment_store_result(experiment_id=experiment_id)
    except (ExperimentConfigError, EvaluationConfigError, ConfigError) as exc:
        _log(experiment_id, f"failed: {exc}", say)
        return _finish(experiment_id, Experiment.Status.FAILED, str(exc))
    except Exception as exc:
        logger.exception("experiment %s failed", experiment_id)
        _log(experiment_id, f"failed: {type(exc).__name__}: {exc}", say)
        return _finish(experiment_id, Experiment.Status.FAILED, f"{type(exc).__name__}: {exc}")
    except BaseException:
        _finish(experiment_id, Experiment.Status.FAILED, "interrupted; resume it to continue")
        raise
    experiment_store_result(experiment_id=experiment_id)
    _log(experiment_id, "finished", say)
    return _finish(experiment_id, Experiment.Status.FINISHED)
