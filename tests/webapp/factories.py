"""Factories for the web app's models. Defaults make valid rows; tests set what they are about."""

from __future__ import annotations

import factory
from django.contrib.auth import get_user_model
from django.utils import timezone

from webapp.accounts.models import Profile, Role
from webapp.audits.models import Audit, AuditItem
from webapp.corpora.models import Corpus, Passage
from webapp.datasets.models import Dataset, Question
from webapp.runs.models import MetricPoint, Run
from webapp.trajectories.models import JudgeVerdict, Step, Trajectory


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    password = factory.django.Password("correct horse battery staple")
    profile = factory.RelatedFactory("tests.webapp.factories.ProfileFactory", factory_related_name="user")


class ProfileFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Profile

    user = factory.SubFactory(UserFactory, profile=None)
    role = Role.RESEARCHER


class CorpusFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Corpus

    name = factory.Sequence(lambda n: f"corpus{n}")


class PassageFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Passage

    corpus = factory.SubFactory(CorpusFactory)
    external_id = factory.Sequence(str)
    title = "Paris"
    text = "Paris is the capital of France."


class DatasetFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Dataset

    name = factory.Sequence(lambda n: f"dataset{n}")


class QuestionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Question

    dataset = factory.SubFactory(DatasetFactory)
    external_id = factory.Sequence(lambda n: f"q{n}")
    text = "What is the capital of France?"
    golden_answers = factory.LazyFunction(lambda: ["Paris"])


class RunFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Run

    name = factory.Sequence(lambda n: f"run{n}")
    kind = Run.Kind.EVAL
    method = "hiprag"
    model_name = "SmolLM2-135M-Instruct"


class MetricPointFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = MetricPoint

    run = factory.SubFactory(RunFactory)
    step = factory.Sequence(int)
    key = "reward/total"
    value = 0.5
    wall_time = factory.LazyFunction(timezone.now)


class TrajectoryFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Trajectory

    run = factory.SubFactory(RunFactory)
    question = factory.SubFactory(QuestionFactory)
    dataset = factory.SelfAttribute("question.dataset")
    question_text = factory.SelfAttribute("question.text")
    golden_answers = factory.SelfAttribute("question.golden_answers")
    format = "hiprag"
    raw_text = "<think>easy</think><answer>Paris</answer>"
    format_ok = True
    final_answer = "Paris"
    exact_match = True
    n_steps = 0
    n_searches = 0


class StepFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Step

    trajectory = factory.SubFactory(TrajectoryFactory)
    run = factory.SelfAttribute("trajectory.run")
    index = factory.Sequence(int)
    kind = Step.Kind.SEARCH
    reasoning = "I need the capital."
    query = "capital of France"
    context = "Paris is the capital of France."
    reward = 0.25


class JudgeVerdictFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = JudgeVerdict

    step = factory.SubFactory(StepFactory)
    trajectory = factory.SelfAttribute("step.trajectory")
    detector = JudgeVerdict.Detector.OVER_SEARCH
    outcome = JudgeVerdict.Outcome.FALSE
    judge_model = "gpt-4.1-mini"


class AuditFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Audit
        skip_postgeneration_save = True

    name = factory.Sequence(lambda n: f"audit{n}")
    sample_size = 1

    @factory.post_generation
    def annotators(self, create: bool, extracted: list[object] | None, **kwargs: object) -> None:
        if create and extracted:
            self.annotators.set(extracted)


class AuditItemFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = AuditItem
        skip_postgeneration_save = True

    audit = factory.SubFactory(AuditFactory)
    trajectory = factory.SubFactory(TrajectoryFactory)
    position = factory.Sequence(int)

    @factory.post_generation
    def assignees(self, create: bool, extracted: list[object] | None, **kwargs: object) -> None:
        """By default every annotator of the audit labels the item."""
        if create:
            self.assignees.set(extracted if extracted is not None else self.audit.annotators.all())
