"""The screen of the training questions by the start model's pass rate (issue 21).

GRPO's process term reaches the gradient only through a group whose rewards differ: a question the start model
always answers, or never, gives a group of equal outcome rewards, and HiPRAG's bonus needs a correct answer
(A ∧ F), so at ~10% accuracy most groups carry no process signal. The screen samples the start model ``n`` times on
every training question (at the training temperature, a seed per sample: ordinary eval runs of the experiment) and
keeps the questions it answered (cover EM, HiPRAG's accuracy) in ``k_min``..``k_max`` of the ``n`` samples, plus a
share drawn from the rest unscreened, so the screen's own bias stays measurable. Each kept row records its pass
count, the sample count and whether it was screened or drawn unscreened (``metadata.screen``); the rows become a
dataset of their own, which every arm trains on.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from webapp.trajectories.models import Trajectory


def pass_counts(run_ids: Iterable[int]) -> Counter[str]:
    """Per question (its external id), in how many of the runs its trajectory was correct (cover EM)."""
    correct = Trajectory.objects.filter(run_id__in=list(run_ids), cover_exact_match=True)
    return Counter(correct.values_list("question__external_id", flat=True))


def screened_rows(
    rows: Sequence[Mapping[str, Any]],
    counts: Mapping[str, int],
    *,
    samples: int,
    low: int,
    high: int,
    unscreened_share: float,
    seed: int,
) -> list[dict[str, Any]]:
    """The rows answered in ``low``..``high`` of ``samples``, then ``unscreened_share`` of the result drawn (seeded)
    from the others; the rows keep their order and record the screen in ``metadata.screen``."""
    passed = {str(row["id"]) for row in rows if low <= counts.get(str(row["id"]), 0) <= high}
    rest = [str(row["id"]) for row in rows if str(row["id"]) not in passed]
    # unscreened / (passed + unscreened) = share
    wanted = (
        round(unscreened_share * len(passed) / (1 - unscreened_share)) if unscreened_share < 1 else len(rest)
    )
    drawn = set(random.Random(seed).sample(rest, min(wanted, len(rest))))
    out = []
    for row in rows:
        key = str(row["id"])
        if key in passed or key in drawn:
            screen = {
                "passes": counts.get(key, 0),
                "samples": samples,
                "kept": "screened" if key in passed else "unscreened",
            }
            out.append({**row, "metadata": {**(row.get("metadata") or {}), "screen": screen}})
    return out
