"""Questions whose answer can be had without any evidence: a yes/no question, or one that names its answer among
the options it offers ("Who was born first, Ari Vatanen or Henrik Svensen?").

An outcome reward cannot tell a guessed answer from a found one, so a policy trained on such questions can earn it
by not searching: answering "no" is right for most "Are X and Y from the same country?" questions, and picking one
of two names is right half the time. Experiment #2 on the H100 (docs/results/experiment-2-h100.md) met exactly that: the screen
by the start model's pass rate kept 19 training questions, every one of them guessable (13 yes/no), and the
λp = 0 arm learnt to answer without searching while its held-out CEM fell (the test split holds 18 guessable
questions in 2,676; the train split 270 in 700). Dropping them from the training questions is a choice of data, not
of reward: the papers train on HotpotQA's train set, comparisons included, so the web app's experiment keeps them
unless asked (``--train-drop-guessable``, the form's checkbox); ``python -m trainer.jobs experiment``, the stage runner,
drops them unless asked to keep them.
"""

from __future__ import annotations

from collections.abc import Iterable

from scoring.metrics import as_golds, normalize_answer

YES_NO = "yes/no"
NAMED_OPTION = "named option"


def guessable(question: str, golds: str | Iterable[str]) -> str | None:
    """Why the question's answer can be guessed (:data:`YES_NO` or :data:`NAMED_OPTION`), or None.

    Yes/no: some gold answer normalizes to "yes" or "no". Named option: every gold answer appears in the question
    as whole words (SQuAD normalization on both sides), as in a choice between the options the question names.
    Every gold, not any: a question with many aliases (NQ's) often names one of them without offering a choice
    ("who wrote the song photograph by ringo starr"; "any" would flag 44 test questions, most of them such).

    >>> guessable("Are Nantong and Jingdezhen situated in the same province ?", ["no"])
    'yes/no'
    >>> guessable("Who was born earlier, Ari Vatanen or Henrik Svensen?", ["Henrik Svensen"])
    'named option'
    >>> guessable("Who directed the film The Feud?", ["Fred Kelsey"]) is None
    True
    """
    normalized = [normalize_answer(g) for g in as_golds(golds)]
    if any(g in ("yes", "no") for g in normalized):
        return YES_NO
    padded = f" {normalize_answer(question)} "
    if normalized and all(g and f" {g} " in padded for g in normalized):
        return NAMED_OPTION
    return None
