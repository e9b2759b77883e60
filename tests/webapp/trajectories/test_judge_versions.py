from __future__ import annotations

import importlib

import pytest
from django.apps import apps

from scoring import formats
from scoring.judging import evidence, hiprag
from tests.webapp.factories import JudgeVerdictFactory, RunFactory, StepFactory
from webapp.trajectories import judge_versions as jv
from webapp.trajectories.models import JudgeVerdict, JudgeVersion
from webapp.trajectories.services import TrajectoryInput, VerdictInput, trajectory_bulk_create

pytestmark = pytest.mark.django_db

RESPONSE = (
    "<think><step><reasoning>r</reasoning><search>capital of France</search>"
    "<context>Paris is the capital.</context><conclusion>Paris.</conclusion></step>"
    "<step><reasoning>So.</reasoning><conclusion>Paris.</conclusion></step></think><answer>Paris</answer>"
)
OPENAI = {"kind": "openai", "base_url": "http://judge", "model": "gpt-x", "timeout": 60.0, "concurrency": 32}


def store(run, judge_model="gpt-x", **verdict):
    item = TrajectoryInput(
        parsed=formats.parse("hiprag", RESPONSE),
        run_id=run.pk,
        verdicts=[
            VerdictInput("over_search", "true", judge_model, step_index=0, **verdict),
            VerdictInput("under_search", "false", judge_model, step_index=1, **verdict),
        ],
    )
    trajectory_bulk_create(items=[item])
    return list(JudgeVerdict.objects.filter(trajectory__run=run).select_related("version"))


def test_every_stored_verdict_gets_the_version_of_its_runs_judge_settings():
    run = RunFactory(method="hiprag", judge_settings=OPENAI)
    verdicts = store(run)
    versions = {v.version for v in verdicts}
    assert len(versions) == 1
    version = versions.pop()
    assert version.kind == "openai" and version.model == "gpt-x"
    assert version.name == f"gpt-x·hiprag-prompt@{version.sha256[:6]}"
    assert version.spec["prompts"]["SEARCH_STEP_VERIFY_PROMPT_V1"] == jv._sha(
        hiprag.SEARCH_STEP_VERIFY_PROMPT_V1
    )
    assert version.sha256 == jv.spec_sha256(version.spec)
    # A second run with the same settings shares the version; another temperature does not.
    assert store(RunFactory(method="hiprag", judge_settings=OPENAI))[0].version_id == version.pk
    warmer = store(RunFactory(method="hiprag", judge_settings={**OPENAI, "temperature": 0.7}))[0].version
    assert warmer.pk != version.pk and warmer.spec["sampling"]["temperature"] == 0.7


def test_a_changed_prompt_is_a_new_version(monkeypatch):
    before = jv.judge_spec(method="hiprag", judge_model="gpt-x", settings=OPENAI)
    jv.prompt_templates.cache_clear()
    monkeypatch.setattr(hiprag, "NON_SEARCH_STEP_VERIFY_PROMPT_V1", "Is this step right? Say True or False.")
    after = jv.judge_spec(method="hiprag", judge_model="gpt-x", settings=OPENAI)
    jv.prompt_templates.cache_clear()
    assert jv.spec_sha256(before) != jv.spec_sha256(after)
    assert (
        before["prompts"]["SEARCH_STEP_VERIFY_PROMPT_V1"] == after["prompts"]["SEARCH_STEP_VERIFY_PROMPT_V1"]
    )


def test_heuristic_and_imported_judges_are_named_by_kind():
    run = RunFactory(method="hiprag", judge_settings={"judge": "evidence"})
    version = store(run, judge_model=evidence.JUDGE_MODEL)[0].version
    assert version.kind == "evidence" and version.name == f"evidence@{version.sha256[:6]}"
    assert version.spec["parser"]["module"] == "scoring.judging.evidence"
    imported = store(RunFactory(method="hiprag", judge_settings={}), judge_model="team-labels")[0].version
    assert imported.name.startswith("imported·team-labels@")


def test_a_given_version_is_kept():
    given = jv.judge_version_get_or_create({"v": 1, "kind": "openai", "model": "m", "prompts": {"x": "1"}})
    verdicts = store(RunFactory(method="hiprag", judge_settings=OPENAI), version_id=given.pk)
    assert {v.version_id for v in verdicts} == {given.pk}


def test_the_data_migration_versions_existing_verdicts_by_stored_settings_else_as_legacy():
    migration = importlib.import_module("webapp.trajectories.migrations.0003_judge_versions")
    judged = RunFactory(method="hiprag", judge_settings=OPENAI)
    bare = RunFactory(method="hiprag", judge_settings={})
    with_settings = JudgeVerdictFactory(
        step=StepFactory(trajectory__run=judged), judge_model="gpt-x", version=None
    )
    without = JudgeVerdictFactory(
        step=StepFactory(trajectory__run=bare), judge_model="old-judge", version=None
    )
    migration.assign_versions(apps, None)
    with_settings.refresh_from_db()
    without.refresh_from_db()
    assert with_settings.version.kind == "openai"
    assert with_settings.version.spec == jv.judge_spec(method="hiprag", judge_model="gpt-x", settings=OPENAI)
    assert without.version.kind == "legacy" and without.version.name.startswith("legacy·old-judge@")
    assert JudgeVersion.objects.count() == 2
