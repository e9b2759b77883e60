"""The screen's rule (issue 21), shared by the stage runner and the web app: the questions the start model answered
in ``low``..``high`` of ``samples`` samples, plus a share of the result drawn (seeded) from the rest unscreened, so
the screen's own bias stays measurable. Each kept row records its pass count, the sample count and whether it was
screened or drawn unscreened (``metadata.screen``)."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any


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
