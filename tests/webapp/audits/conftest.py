"""A small audit as the adjudication, lifecycle and export tests need it: two trajectories of a search and a
non-search step, labelled by Ann and Bob, judged by an LLM judge and by the evidence judge."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from tests.webapp.factories import AuditFactory, AuditItemFactory, JudgeVerdictFactory, StepFactory
from webapp.accounts.models import Role
from webapp.accounts.services import user_create
from webapp.audits.models import Audit, AuditItem
from webapp.audits.services import label_save
from webapp.trajectories.models import Step

LLM = "gpt-4.1-mini"
EVIDENCE = "evidence-heuristic"


@dataclass
class SmallAudit:
    audit: Audit
    items: list[AuditItem]
    steps: list[Step]  # item 0: search, non-search; item 1: search, non-search

    def label(self, user, step_number: int, value: str, comment: str = "") -> None:
        step = self.steps[step_number]
        item = self.items[step_number // 2]
        label_save(item=item, annotator=user, step_id=step.pk, label=value, comment=comment, seconds_spent=2)


@pytest.fixture
def bob(db):
    return user_create(username="bob", password="pw-bob-123456", role=Role.ANNOTATOR)


@pytest.fixture
def small_audit(annotator, bob):
    audit = AuditFactory(name="small", annotators=[annotator, bob], annotators_per_item=2, seed=11)
    items, steps = [], []
    # (over-search verdicts of the LLM judge and the evidence judge, under-search verdicts likewise)
    verdicts = [(("true", "false"), ("false", "false")), (("false", "false"), ("false", "true"))]
    for position, ((over_llm, over_evidence), (under_llm, under_evidence)) in enumerate(verdicts):
        item = AuditItemFactory(audit=audit, position=position)
        search = StepFactory(trajectory=item.trajectory, index=0, kind="search", query=f"query {position}")
        thinking = StepFactory(
            trajectory=item.trajectory, index=1, kind="non_search", query=None, conclusion=f"so {position}"
        )
        for model, outcome in ((LLM, over_llm), (EVIDENCE, over_evidence)):
            JudgeVerdictFactory(step=search, detector="over_search", outcome=outcome, judge_model=model)
        for model, outcome in ((LLM, under_llm), (EVIDENCE, under_evidence)):
            JudgeVerdictFactory(step=thinking, detector="under_search", outcome=outcome, judge_model=model)
        items.append(item)
        steps.extend([search, thinking])
    return SmallAudit(audit, items, steps)
