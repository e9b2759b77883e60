"""Judge outcomes, as the rewards take them."""

from __future__ import annotations

from enum import StrEnum


class Verdict(StrEnum):
    """A judge's outcome for one question about one step or trajectory.

    ``UNPARSEABLE`` and ``ERROR`` are never read as ``FALSE``: a reward that needs a verdict it does not have
    raises :class:`MissingVerdict` (or, in a reference variant, does what the released code did, documented there).
    """

    TRUE = "true"
    FALSE = "false"
    UNPARSEABLE = "unparseable"  # the judge replied, but not in the format its prompt asks for
    ERROR = "error"  # the judge call failed after its retries (set by agent/, never by scoring/)

    @property
    def usable(self) -> bool:
        return self in (Verdict.TRUE, Verdict.FALSE)


class MissingVerdict(ValueError):
    """A reward needs a judge outcome that is missing, unparseable or an error."""
