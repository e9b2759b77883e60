"""Database-backed judge cache and Search-P1 plan store for code that runs inside an asyncio event loop.

agent.cache.JudgeCache and agent.judges.ReferencePlanStore are synchronous protocols called from coroutines.
Django refuses ORM calls from a thread that runs an event loop (SynchronousOnlyOperation), and a helper thread
would use its own database connection, outside the caller's transaction (and on SQLite it would wait on the
caller's write lock). So both stores work on memory while the loop runs: they are loaded before each
``evaluate_sync`` call and their new entries are written after it (``flush``), in the caller's thread.

The judge cache loads every stored reply of its judge model (key, reply, token counts), because the keys of the
calls to come depend on text the policy has not generated yet. Plans are loaded for the batch's questions only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from django.db.models import F

from agent.cache import CachedReply
from scoring.judging.searchp1 import ReferencePlan as Plan
from webapp.evaluation.models import ReferencePlan
from webapp.trajectories.models import JudgeCallCache


class PrefetchedJudgeCache:
    """agent.cache.JudgeCache over ``JudgeCallCache`` rows of one judge model."""

    def __init__(self, judge_model: str) -> None:
        self.judge_model = judge_model
        self._replies: dict[str, CachedReply] = {}
        self._new: dict[str, CachedReply] = {}
        self._hits: Counter[str] = Counter()

    def load(self) -> int:
        rows = JudgeCallCache.objects.filter(judge_model=self.judge_model).values_list(
            "key", "reply", "prompt_tokens", "completion_tokens"
        )
        for key, reply, prompt_tokens, completion_tokens in rows.iterator(chunk_size=2000):
            self._replies[key] = CachedReply(reply, prompt_tokens or 0, completion_tokens or 0)
        return len(self._replies)

    def get(self, key: str) -> CachedReply | None:
        found = self._replies.get(key)
        if found is not None and key not in self._new:
            self._hits[key] += 1
        return found

    def put(self, key: str, reply: CachedReply) -> None:
        self._replies[key] = reply
        self._new[key] = reply

    def flush(self) -> int:
        """Write the new replies and the hit counts; returns the number of new rows. Call in a transaction."""
        JudgeCallCache.objects.bulk_create(
            [
                JudgeCallCache(
                    key=key,
                    judge_model=self.judge_model,
                    reply=reply.text,
                    prompt_tokens=reply.prompt_tokens,
                    completion_tokens=reply.completion_tokens,
                )
                for key, reply in self._new.items()
            ],
            batch_size=1000,
            ignore_conflicts=True,  # another run may have stored the same call meanwhile: same reply
        )
        by_count: dict[int, list[str]] = {}
        for key, count in self._hits.items():
            by_count.setdefault(count, []).append(key)
        for count, keys in by_count.items():
            JudgeCallCache.objects.filter(key__in=keys).update(hits=F("hits") + count)
        written = len(self._new)
        self._new.clear()
        self._hits.clear()
        return written


class PrefetchedPlanStore:
    """agent.judges.ReferencePlanStore over ``ReferencePlan`` rows of one planner model; question ids are the
    ``Question`` primary keys as strings (what the service puts in ``agent.rollout.Question.id``)."""

    def __init__(self, planner_model: str) -> None:
        self.planner_model = planner_model
        self._plans: dict[str, Plan] = {}
        self._new: dict[str, Plan] = {}

    def load(self, question_ids: Iterable[int]) -> int:
        rows = ReferencePlan.objects.filter(
            planner_model=self.planner_model, question_id__in=list(question_ids)
        ).values_list("question_id", "path", "planner")
        for question_id, path, planner in rows:
            self._plans[str(question_id)] = Plan(tuple(path), planner)
        return len(self._plans)

    def get(self, question_id: str) -> Plan | None:
        return self._plans.get(question_id)

    def put(self, question_id: str, plan: Plan) -> None:
        self._plans[question_id] = plan
        self._new[question_id] = plan

    def flush(self) -> int:
        ReferencePlan.objects.bulk_create(
            [
                ReferencePlan(
                    question_id=int(question_id),
                    planner_model=self.planner_model,
                    path=list(plan.path),
                    planner=plan.planner,
                )
                for question_id, plan in self._new.items()
            ],
            ignore_conflicts=True,
        )
        written = len(self._new)
        self._new.clear()
        return written
