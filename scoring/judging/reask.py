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
* the conclusion's words that are not the query's (given ``query``): a regenerated answer echoes its question, so
  "70th Academy Awards" re-asked matches "The 70th Academy Awards ceremony was held …" on the query's words
  alone; what must match is what the step concluded *beyond* what it asked;
* TRUE (equivalent ⇒ the search was redundant ⇒ over-search) when at least :data:`COVERED_SHARE` of those words
  occur in the regenerated answer — the model said, without retrieval, what the step concluded with it;
* FALSE otherwise, and FALSE when no such word is left (the conclusion asserts nothing the query did not).
"""

from __future__ import annotations

from scoring.judging.evidence import content_words
from scoring.verdicts import Verdict

JUDGE_MODEL = "reask-lexical"
COVERED_SHARE = 0.8


def lexical_equivalence(conclusion: str, regenerated: str, query: str = "") -> Verdict:
    """TRUE when the regenerated answer o'_i says what the step's conclusion o_i says beyond the query q_i.

    >>> lexical_equivalence("It is in Paris.", "Paris is the capital of France.", "capital of France").value
    'true'
    >>> lexical_equivalence("It is 330 metres tall.", "The tower is tall.", "Eiffel Tower height").value
    'false'
    >>> lexical_equivalence("The Eiffel Tower is tall.", "The Eiffel Tower is tall.", "Eiffel Tower tall").value
    'false'
    """
    wanted = content_words(conclusion or "") - content_words(query or "")
    if not wanted:
        return Verdict.FALSE
    covered = len(wanted & content_words(regenerated or "")) / len(wanted)
    return Verdict.TRUE if covered >= COVERED_SHARE else Verdict.FALSE
