"""``python manage.py evaluate``: one evaluation run, in this process, then its table in the papers' layout."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from agent.budgets import BUDGET_BY_ROLLOUT_NAME, RolloutOverrides, budget_field
from agent.judge_spec import EVALUATE
from webapp.common.commands import user_by_name_option
from webapp.common.judge_options import JudgeSpecError, add_judge_arguments, judge_from_options
from webapp.datasets.models import Dataset
from webapp.evaluation import selectors
from webapp.evaluation.forms import ROLLOUT_FIELDS
from webapp.evaluation.reporting import report_text
from webapp.evaluation.services import evaluation_run_create, evaluation_run_execute
from webapp.evaluation.specs import EvaluationConfigError, EvaluationSpec
from webapp.runs.models import Method, Run


class Command(BaseCommand):
    help = (
        "Run an evaluation synchronously (the same service as the web form's Celery task) and print the report: "
        "one row per dataset, then Avg. (mean of the rows) and All (pooled)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--model", default=str(settings.EVAL_DEFAULT_MODEL), help="local folder or served name"
        )
        parser.add_argument("--base-url", default="", help="OpenAI-compatible /v1 URL serving --model")
        parser.add_argument("--api-key-env", default="", help="NAME of the variable holding the policy's key")
        parser.add_argument("--dataset", action="append", required=True, help="dataset name (repeatable)")
        parser.add_argument("--method", choices=Method.values, default="hiprag")
        retrieval = parser.add_mutually_exclusive_group(required=True)
        retrieval.add_argument("--index", type=int, help="Index id (a ready index folder)")
        retrieval.add_argument("--retrieve-url", default="", help="a Search-R1-compatible /retrieve server")
        add_judge_arguments(parser, default="none", use=EVALUATE)
        parser.add_argument("--answer-judge", action="store_true", help="LLM-as-judge answer correctness too")
        parser.add_argument("--limit", type=int, help="questions per dataset")
        for name, budget in BUDGET_BY_ROLLOUT_NAME.items():  # agent.budgets' declarations
            declared = budget_field(budget).metadata
            parser.add_argument(
                f"--{name.replace('_', '-')}",
                type=int,
                help=f"{declared['help']} Default: the method's paper setting.",
            )
        parser.add_argument("--params", default="{}", help="reward parameters as JSON")
        parser.add_argument("--batch-size", type=int, default=settings.EVAL_BATCH_SIZE)
        parser.add_argument("--name", default="")
        parser.add_argument("--user", default="", help="username recorded as the run's creator")
        parser.add_argument("--json", action="store_true", help="print the report rows as JSON instead")

    def handle(self, *args: Any, **options: Any) -> None:
        spec = self._spec(options)
        user = user_by_name_option(options["user"])
        try:
            run = evaluation_run_create(user=user, spec=spec, name=options["name"], enqueue=False)
        except EvaluationConfigError as exc:
            raise CommandError(f"--{exc.field.replace('_', '-')}: {exc.message}") from None
        self.stderr.write(f"run #{run.pk}: evaluating {spec.method} with {spec.model}")
        run = evaluation_run_execute(run_id=run.pk)
        rows = selectors.evaluation_report_rows(run_id=run.pk)
        if options["json"]:
            self.stdout.write(json.dumps(rows, indent=2))
        elif rows:
            self.stdout.write(report_text(rows))
        stats = selectors.evaluation_stats_get(run_id=run.pk)
        if stats is not None:
            for model, s in stats.judge_stats.items():
                self.stderr.write(
                    f"judge {model}: {s['calls']} calls, {s['cache_hits']} cached, {s['errors']} errors, "
                    f"{s['prompt_tokens']}+{s['completion_tokens']} tokens, {s['latency_seconds']:.1f} s"
                )
            self.stderr.write(f"{stats.n_trajectories} trajectories in {stats.seconds:.1f} s (run #{run.pk})")
        if run.status != Run.Status.FINISHED:
            raise CommandError(f"run #{run.pk} {run.status}: {run.error}")

    def _spec(self, options: dict[str, Any]) -> EvaluationSpec:
        names = options["dataset"]
        found = dict(Dataset.objects.filter(name__in=names).values_list("name", "pk"))
        missing = [n for n in names if n not in found]
        if missing:
            raise CommandError(f"--dataset: no dataset named {', '.join(map(repr, missing))}")
        try:
            judge = judge_from_options(options, use=EVALUATE)
        except JudgeSpecError as exc:
            raise CommandError(f"--judge: {exc.message}") from None
        try:
            params = json.loads(options["params"])
        except json.JSONDecodeError as exc:
            raise CommandError(f"--params: not JSON ({exc.msg})") from None
        rollout = RolloutOverrides(**{k: options[k] for k in ROLLOUT_FIELDS if options.get(k) is not None})
        model = options["model"]
        if not options["base_url"] and Path(model).is_dir():
            model = str(Path(model).resolve())
        return EvaluationSpec(
            method=options["method"],
            model=model,
            backend="openai" if options["base_url"] else "transformers",
            base_url=options["base_url"],
            api_key_env=options["api_key_env"],
            dataset_ids=tuple(found[n] for n in dict.fromkeys(names)),
            index_id=options["index"],
            retrieve_url=options["retrieve_url"] or "",
            judge=dataclasses.replace(judge, answer_judge=options["answer_judge"]),
            params=params,
            rollout=rollout,
            limit=options["limit"],
            batch_size=options["batch_size"],
        )
