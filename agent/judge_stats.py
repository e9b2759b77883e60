"""What LLM judging costs: :class:`JudgeStats`, a judge client's per-run totals (calls, cache hits, retries, errors,
tokens, latency, verdicts per detector), and :class:`JudgeCostMeter`, a training run's judge cost per logged step
(the ``judge/*`` metrics)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(slots=True)
class JudgeStats:
    """Per-run totals. ``calls`` counts requests asked for (cache hits included), ``attempts`` HTTP attempts."""

    calls: int = 0
    cache_hits: int = 0
    attempts: int = 0
    retries: int = 0
    errors: int = 0
    unparseable: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_seconds: float = 0.0
    by_detector: dict[str, dict[str, int]] = field(default_factory=dict)

    def record_verdict(self, detector: str, outcome: str) -> None:
        counts = self.by_detector.setdefault(detector, {})
        counts[outcome] = counts.get(outcome, 0) + 1
        if outcome == "unparseable":
            self.unparseable += 1

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


JUDGE_COST_KEYS = ("judge/calls", "judge/errors", "judge/tokens_in", "judge/tokens_out", "judge/seconds")


@dataclass(slots=True)
class JudgeCostMeter:
    """A training run's judge cost since its metrics were last written: each rollout batch's :class:`JudgeStats`
    (one per LLM judge) is added, and :meth:`take` returns the sums as the metrics ``judge/calls`` (calls sent to
    the judge: cache hits and shared in-flight requests left out), ``judge/errors`` (calls that failed after their
    last retry), ``judge/tokens_in`` and ``judge/tokens_out`` (prompt and completion tokens the judge reported),
    ``judge/seconds`` (summed latency of the calls, backoff sleeps included; concurrent calls overlap, so it can
    exceed the step's wall time), then starts again from zero.

    A batch judged without an LLM (the evidence heuristic, the lexical re-ask match) adds nothing, and
    :meth:`take` returns no metrics until one does: a curve of zeros would say "free", not "no judge was called".
    """

    calls: int = 0
    errors: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    seconds: float = 0.0
    batches: int = 0

    def add(self, stats: JudgeStats | dict[str, Any]) -> None:
        """Add one batch's stats of one judge (a :class:`JudgeStats` or its ``as_dict()``)."""
        values = stats.as_dict() if isinstance(stats, JudgeStats) else stats
        self.calls += int(values.get("calls", 0)) - int(values.get("cache_hits", 0))
        self.errors += int(values.get("errors", 0))
        self.tokens_in += int(values.get("prompt_tokens", 0))
        self.tokens_out += int(values.get("completion_tokens", 0))
        self.seconds += float(values.get("latency_seconds", 0.0))
        self.batches += 1

    def take(self) -> dict[str, float]:
        """The metrics since the last take (empty when no LLM judge was added), and a fresh start."""
        if not self.batches:
            return {}
        found = dict(
            zip(
                JUDGE_COST_KEYS,
                (self.calls, self.errors, self.tokens_in, self.tokens_out, self.seconds),
                strict=True,
            )
        )
        self.calls = self.errors = self.tokens_in = self.tokens_out = self.batches = 0
        self.seconds = 0.0
        return {key: float(value) for key, value in found.items()}
