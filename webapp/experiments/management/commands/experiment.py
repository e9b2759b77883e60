"""``python manage.py experiment``: train every method from the same start, evaluate every model on the same held-out
questions, print the papers' table with paired-bootstrap differences from the baseline (docs/experiment.md)."""

from __future__ import annotations

import argparse
import json
import signal
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agent.judge_spec import EXPERIMENT
from trainer.config import ALGORITHMS, config_field
from webapp.common.commands import user_by_name_option
from webapp.common.judge_options import add_judge_arguments
from webapp.corpora.models import Index
from webapp.datasets.models import Dataset
from webapp.evaluation.specs import EvaluationConfigError
from webapp.experiments import inputs, services
from webapp.experiments.models import Experiment
from webapp.experiments.processes import ExperimentBusy
from webapp.experiments.reporting import result_text
from webapp.experiments.specs import (
    DEFAULT_BASELINE,
    DEFAULT_JUDGE,
    DEFAULT_METHODS,
    DEFAULTS,
    EVAL_ENGINES,
    KNOB_CHOICES,
    KNOBS,
    SCREEN_FIELDS,
    Arm,
    ExperimentConfigError,
    ExperimentSpec,
    knob_default,
    knob_name,
    parse_arm,
    spec_option,
)
from webapp.training import executors

_D = DEFAULTS


SCREEN_HELP = (  # the spec's screen fields (trainer.jobs.screen_rule)
    ("screen_samples", "N", "sample the start model N times per training question (0: no screen)"),
    ("screen_min_passes", "K", "keep questions answered at least K times"),
    ("screen_max_passes", "K", "... and at most K times (-1: N - 1: a group can then hold both outcomes)"),
    ("screen_unscreened_share", "S", "share of the training set drawn from the questions the screen drops"),
)


def _interrupt(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)  # unwinds the supervisor, which kills its trainer before it goes


class Command(BaseCommand):
    help = (
        "Train every arm (--arm NAME=METHOD:KEY=VALUE; default an arm per method of search_r1,hiprag) from the "
        "same start model with the same questions, data order and seed (--seeds S: once per seed pair); evaluate the start model and every "
        "trained model on the same held-out questions; store it all as linked runs and print the papers' table "
        "with paired-bootstrap 95% intervals of each arm-minus-baseline and trained-minus-start difference. "
        "Resume a stopped experiment with --resume ID."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--resume", type=int, metavar="ID", help="continue experiment ID (other options ignored)"
        )
        parser.add_argument(
            "--arm",
            action="append",
            default=[],
            metavar="NAME=METHOD[:KEY=VALUE,...]",
            help="an arm: a name, its reward method and that method's weights, e.g. --arm outcome=hiprag:lambda_p=0 "
            "--arm process=hiprag:lambda_p=0.4 (repeat it; every arm trains from the same start, questions, order "
            "and seed)",
        )
        parser.add_argument(
            "--methods",
            default="",
            help=f"shorthand: an arm per method, named after it (default {','.join(DEFAULT_METHODS)})",
        )
        parser.add_argument(
            "--baseline",
            default="",
            help=f"the arm differences are taken from (default {DEFAULT_BASELINE} when an arm has that name, else "
            "the first arm)",
        )
        seeds_default, seeds = spec_option("seeds")  # ExperimentSpec.seeds: its range and help
        parser.add_argument(
            "--seeds",
            type=int,
            default=seeds_default,
            metavar="S",
            help=f"{seeds['help']} ({seeds['min']} to {seeds['max']}; default %(default)s)",
        )
        parser.add_argument(
            "--model",
            default="",
            help="start policy folder (default: VAR_DIR/models/SmolLM2-135M-Instruct-warm), or 'tiny-random'",
        )
        train = parser.add_mutually_exclusive_group(required=False)
        train.add_argument("--train-questions", metavar="FILE", help="FlashRAG JSONL of training questions")
        train.add_argument("--train-dataset", metavar="NAME", help="a stored dataset to train on")
        parser.add_argument(
            "--train-split", default="", help="only rows whose metadata.split starts with this"
        )
        parser.add_argument(
            "--train-limit", type=int, default=0, help="the first N training questions (0: all)"
        )
        parser.add_argument(
            "--train-drop-guessable",
            action="store_true",
            help="leave out training questions answerable without evidence: yes/no, or the answer named among "
            "the question's options (an outcome reward pays for guessing them; docs/experiment.md, Experiment #2)",
        )
        evaluation = parser.add_mutually_exclusive_group(required=False)
        evaluation.add_argument(
            "--eval-questions", metavar="FILE", help="FlashRAG JSONL of held-out questions"
        )
        evaluation.add_argument(
            "--eval-dataset", metavar="NAME", help="a stored dataset of held-out questions"
        )
        parser.add_argument(
            "--eval-split", default="", help="only rows whose metadata.split starts with this"
        )
        parser.add_argument(
            "--eval-limit", type=int, default=0, help="the first N held-out questions (0: all)"
        )
        index = parser.add_mutually_exclusive_group(required=False)
        index.add_argument("--index", metavar="PATH", help="an index folder (retrieval.index.build_index)")
        index.add_argument("--index-id", type=int, help="a ready Index row")
        add_judge_arguments(parser, default=DEFAULT_JUDGE, use=EXPERIMENT)
        parser.add_argument("--algorithm", choices=ALGORITHMS, default=_D.algorithm)
        for path in KNOBS:  # trainer.config's fields: their types, defaults (the experiment's) and help
            f, annotation = config_field(path)
            kind: dict[str, Any] = (
                # --flag / --no-flag: argparse's type=bool would read "False" as true
                {"action": argparse.BooleanOptionalAction}
                if annotation is bool
                else {"type": annotation, "choices": KNOB_CHOICES.get(path)}
            )
            parser.add_argument(
                f"--{knob_name(path).replace('_', '-')}",
                **kind,
                default=knob_default(path),
                help=f.metadata.get("help", "").replace("%", "%%") + f" ({path}; default %(default)s)",
            )
        screen = parser.add_argument_group(
            "screen of the training questions by the start model's pass rate (docs/experiment.md)"
        )
        for name, metavar, help_text in SCREEN_HELP:
            default = getattr(_D, name)
            screen.add_argument(
                f"--{name.replace('_', '-')}",
                type=type(default),
                default=default,
                metavar=metavar,
                help=help_text,
            )
        parser.add_argument("--eval-batch-size", type=int, default=_D.eval_batch_size)
        parser.add_argument(
            "--eval-engine",
            choices=EVAL_ENGINES,
            default=_D.eval_engine,
            help="the evaluations' engine: vllm needs `make vllm` (run this command with .venv-vllm/bin/python)",
        )
        parser.add_argument("--resamples", type=int, default=_D.resamples, help="bootstrap resamples")
        parser.add_argument(
            "--executor",
            choices=executors.EXECUTORS,
            default=_D.executor,
            help="where each arm's training runs: local (a subprocess of this process) or ray (a job on the Ray "
            "cluster at RAY_ADDRESS, reporting to TRAINING_INGEST_URL); evaluations run here either way",
        )
        parser.add_argument("--name", default="")
        parser.add_argument("--user", default="", help="username recorded as the creator")
        parser.add_argument(
            "--json", action="store_true", help="print the result as JSON instead of the table"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        signal.signal(signal.SIGTERM, _interrupt)
        if options["resume"] is not None:
            experiment = Experiment.objects.filter(pk=options["resume"]).first()
            if experiment is None:
                raise CommandError(f"--resume: no experiment {options['resume']}")
        else:
            experiment = self._create(options)
        self.stderr.write(
            f"experiment #{experiment.pk} ({experiment.name}); if it stops, continue it with: "
            f"python manage.py experiment --resume {experiment.pk}"
        )
        try:
            experiment = services.experiment_execute(experiment_id=experiment.pk, say=self.stderr.write)
        except ExperimentBusy as exc:
            raise CommandError(str(exc)) from None
        result = experiment.result or {}
        if options["json"]:
            self.stdout.write(json.dumps(result, indent=2))
        else:
            self.stdout.write(result_text(result))
        if experiment.status != Experiment.Status.FINISHED:
            raise CommandError(
                f"experiment #{experiment.pk} {experiment.status}: {experiment.error}; "
                f"continue it with --resume {experiment.pk}"
            )

    def _create(self, options: dict[str, Any]) -> Experiment:
        user = user_by_name_option(options["user"])
        try:
            if options["arm"] and options["methods"]:
                raise ExperimentConfigError("arm", "give --arm or --methods, not both")
            methods = [m.strip() for m in (options["methods"] or ",".join(DEFAULT_METHODS)).split(",")]
            arms = tuple(parse_arm(text) for text in options["arm"]) or tuple(
                Arm(name=m, method=m) for m in methods if m
            )
            names = [arm.name for arm in arms]
            baseline = options["baseline"] or (
                DEFAULT_BASELINE if DEFAULT_BASELINE in names or not names else names[0]
            )
            model = inputs.resolve_model(options["model"] or None)
            train = self._questions(options, "train")
            held_out = self._questions(options, "eval")
            overlap = {q["question"] for q in train} & {q["question"] for q in held_out}
            if overlap:
                self.stderr.write(f"warning: {len(overlap)} held-out question(s) are also training questions")
            index = self._index(options)
            judge = inputs.judge_choice(
                options["judge"],
                model=options["judge_model"],
                api_key_env=options["judge_api_key_env"],
                base_url=options["judge_base_url"],
            )
            spec = ExperimentSpec.with_knobs(
                {knob_name(path): options[knob_name(path)] for path in KNOBS},
                arms=arms,
                baseline=baseline,
                model=model,
                train_dataset_id=inputs.experiment_dataset(
                    rows=train, label=inputs.train_label(options["train_drop_guessable"])
                ).pk,
                eval_dataset_id=inputs.experiment_dataset(rows=held_out, label="eval").pk,
                index_id=index.pk,
                judge=judge,
                algorithm=options["algorithm"],
                eval_batch_size=options["eval_batch_size"],
                **{name: options[name] for name in SCREEN_FIELDS},
                eval_engine=options["eval_engine"],
                resamples=options["resamples"],
                executor=options["executor"],
                seeds=options["seeds"],
            )
            services.training_config_check(spec)
            return services.experiment_create(user=user, spec=spec, name=options["name"], enqueue=False)
        except (ExperimentConfigError, EvaluationConfigError) as exc:
            raise CommandError(f"--{exc.field.replace('_', '-')}: {exc.message}") from None

    def _questions(self, options: dict[str, Any], which: str) -> list[dict[str, Any]]:
        path, name = options[f"{which}_questions"], options[f"{which}_dataset"]
        if path:
            rows = inputs.read_question_file(path)
        elif name:
            dataset = Dataset.objects.filter(name=name).first()
            if dataset is None:
                raise ExperimentConfigError(f"{which}_dataset", f"no dataset named {name!r}")
            rows = inputs.dataset_rows(dataset)
        else:
            raise ExperimentConfigError(
                f"{which}_questions", f"give --{which}-questions FILE or --{which}-dataset NAME"
            )
        return inputs.select_rows(
            rows,
            split=options[f"{which}_split"],
            limit=options[f"{which}_limit"],
            drop_guessable=options.get(f"{which}_drop_guessable", False),
        )

    def _index(self, options: dict[str, Any]) -> Index:
        if options["index"]:
            return inputs.index_for_folder(options["index"])
        if options["index_id"] is not None:
            index = Index.objects.filter(pk=options["index_id"], status=Index.Status.READY).first()
            if index is None:
                raise ExperimentConfigError("index_id", f"no ready index {options['index_id']}")
            return index
        raise ExperimentConfigError("index", "give --index PATH (an index folder) or --index-id ID")
