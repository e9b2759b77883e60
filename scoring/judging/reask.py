"""The re-ask over-search test (HiPRAG Sec. 3.2) without an LLM equivalence judge: a lexical stand-in.

HiPRAG flags a search step s_i^R = (r_i, q_i, c_i, o_i) as over-search when the policy, asked q_i as a standalone
question without retrieval (:func:`scoring.judging.hiprag.regeneration_prompt`), gives an answer o'_i that an
external judge finds semantically equivalent to the step's conclusion o_i (Fig. 5's prompt,
:func:`scoring.judging.hiprag.over_search_message`). ``agent.judges.hiprag_over_search`` does exactly that with any
judge client. Where no judge worth the name exists (this CPU: a 135M policy judging itself mostly breaks the
``<answer>True</answer>`` format), :func:`lexical_equivalence` compares o_i and o'_i by their words instead —
ours, not the paper's, stored under the judge model name :data:`JUDGE_MODEL`:

* content words as the evidence judge reads them (:func:`scoring.judging.evidence.content_words`: lower-cased
  alphanumeric tokens minus a fixed stop-word list, so "It is in Paris." is {paris});
* TRUE (equivalent ⇒ the search was redundant ⇒ over-search) when at least :data:`COVERED_SHARE` of the
  conclusion's content words occur in the regenerated answer — the model said, without retrieval, what the step
  concluded with it;
* FALSE otherwise, and FALSE when the conclusion has no content word (it asserts nothing to match).
"""

from __future__ import annotations

from scoring.judging.evidence import content_words
from scoring.verdicts import Verdict

JUDGE_MODEL = "reask-lexical"
COVERED_SHARE = 0.8


def lexical_equivalence(conclusion: str, regenerated: str) -> Verdict:
    """TRUE when the regenerated answer o'_i says what the step's conclusion o_i says (module docstring).

    >>> lexical_equivalence("It is in Paris.", "Paris is the capital of France.").value
    'true'
    >>> lexical_equivalence("It is 330 metres tall.", "The tower is tall.").value
    'false'
    """
    wanted = content_words(conclusion or "")
    if not wanted:
        return Verdict.FALSE
    covered = len(wanted & content_words(regenerated or "")) / len(wanted)
    return Verdict.TRUE if covered >= COVERED_SHARE else Verdict.FALSE
