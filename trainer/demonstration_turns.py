"""Each method's model turns of a warm-start demonstration, in its own format, and the conclusions they quote.

``TURNS[method](plan, k, so_far)`` is the model's k-th turn (0-based) of a :class:`~trainer.demonstration_plans.Plan`
given the response so far (the environment's text included); :class:`trainer.demonstrations.ScriptBackend` plays
them inside the method's real rollout loop. A conclusion (:func:`conclusion_from`) is a short sentence taken from
the passages the real retriever returned for the hop.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from trainer.demonstration_plans import STOPWORDS, Plan, content_words

# "Doc 1(Title: Mario Costa (director)) text": a title may hold one level of parentheses.
_PASSAGE = re.compile(r"Doc \d+\(Title: ((?:[^()]|\([^()]*\))*)\)(.*?)(?=Doc \d+\(Title: |$)", re.S)
_CLAUSE_WORDS = frozenset("and but which who whom where while whose".split())
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
# A conclusion's words: about 25 tokens, so Search-R1's turn (conclusion, next intent, query) fits the demo's
# 64-token turn budget. 30 words made 35 of HiPRAG's 256 model turns and 83 of Search-R1's 152 exceed 50 tokens
# (up to 123): turns the budget would cut at training time.
MAX_CONCLUSION_WORDS = 14
# Search-R1's turn holds the previous hop's conclusion *and* the count, the next intent and the query (HiPRAG's
# conclusion is a turn of its own), so its conclusion is shorter still. At 14 words 6-9 of its 56 demonstrations had
# a turn over the 64-token budget (left out) and 20-25 model turns went over 56 tokens; the warm model then wrote
# turns a few tokens longer than it was shown, which the budget cut. At 8 words: 1-3 left out, 9-10 over 56, and
# Search-R1's format-ok on 40 unseen questions 0.925-0.975 over three seeds (0.700-0.875 at 14; docs/warm_start.md,
# recipe 6).
SEARCH_R1_CONCLUSION_WORDS = 8


def conclusion_from(
    observation: str, title: str, question: str, max_words: int = MAX_CONCLUSION_WORDS
) -> str:
    """A short conclusion from the retrieved passages: a sentence of the passage titled ``title`` (of every passage
    when none is), the one sharing most words with the title and the question (first wins ties), without its
    parentheticals, cut at a clause boundary to at most ``max_words`` words, without any markup.

    Short and plain on purpose: a conclusion is one model turn, and a demonstration's turn must fit the training
    run's per-turn token budget (``max_turn_tokens``, 64 in the demo) with room to spare, or the warm model learns
    turns the budget cuts. Parentheticals (dates, other-language names, ``Tokaleya Tonga: Mosi - oa - Tunya``)
    are what a small model copies into repetition loops under greedy decoding; they carry little of the bridge
    fact. Choosing from the hop's own passage keeps a later hop from repeating an earlier hop's conclusion."""
    text = re.sub(r"<[^>]+>", " ", observation)
    passages = [(t.strip(), body) for t, body in _PASSAGE.findall(text)] or [("", text)]
    own = [body for t, body in passages if t.lower() == title.strip().lower()]
    wanted = {w.lower() for w in content_words(f"{title} {question}")}
    for bodies in (own, [body for _, body in passages]):
        plain = _plain(" ".join(bodies))
        # A whole sentence beats one the observation budget cut off; then the most shared words; first wins ties.
        scored = [
            ((s.endswith((".", "!", "?")), len({w.lower() for w in content_words(s)} & wanted)), -i, s)
            for i, s in enumerate(_SENTENCE.split(" ".join(plain.split())))
            if len(s.split()) >= 4
        ]
        if scored:
            best = max(scored)[2]
            return _clause(re.sub(r"\s+([,.;:!?])", r"\1", best), max_words)
    return f"Nothing was found about {title}."


def _plain(text: str) -> str:
    """``text`` without its parentheticals (nested ones too, and one the observation budget cut open:
    "Grangier( 5 May 1911 – 27 April 1") and without control or invisible format characters. One linear pass: a
    regex over a hostile passage (a million spaces before a parenthesis) took quadratic time."""
    out, depth = [], 0
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(0, depth - 1)
        elif depth == 0 and (ch.isprintable() or ch.isspace()):
            out.append(ch)
    return "".join(out)


def _clause(sentence: str, max_words: int) -> str:
    """``sentence`` in at most ``max_words`` words: whole when it fits, else up to its last comma, semicolon or
    clause word ("and", "which", ...) within the limit (when that keeps at least half of it), else the first
    ``max_words`` words; a sentence the observation budget cut off ends at such a boundary too. Never ends on a
    dangling function word ("between Zambia and.")."""
    words = sentence.split()
    cut = len(words) > max_words or not sentence.endswith((".", "!", "?"))
    if cut:  # a long sentence, or one the observation budget cut off: end it at a clause boundary
        head = words[:max_words]
        cuts = [
            i
            for i, w in enumerate(head)
            if i + 1 >= max_words // 2
            and (w.endswith((",", ";")) or (i + 1 < len(head) and head[i + 1].lower() in _CLAUSE_WORDS))
        ]
        words = head[: cuts[-1] + 1] if cuts else head
        while len(words) > 1 and words[-1].lower().strip(",;:") in STOPWORDS:
            words.pop()
    out = " ".join(words).rstrip(",;: ")
    return out if out.endswith((".", "!", "?")) else out + "."


def _last_block(text: str, start: str, end: str) -> str:
    at = text.rfind(start)
    if at < 0:
        return ""
    stop = text.find(end, at)
    return text[at + len(start) : stop if stop >= 0 else len(text)]


# --- each method's turns ---------------------------------------------------------------------------------------
# ``turn(plan, k, so_far)`` is the model's k-th turn (0-based) given the response so far (the environment's text
# included). The loops cut a turn at its boundary tag, so a turn ends with exactly one.


def _observation(so_far: str) -> str:
    for start, end in (
        ("<information>", "</information>"),
        ("<context>", "</context>"),
        ("<tool_response>", "</tool_response>"),
    ):
        block = _last_block(so_far, start, end)
        if block:
            return block
    return ""


def _searchr1_turn(plan: Plan, k: int, so_far: str) -> str:
    if not plan.hops:
        return f"<think>This is common knowledge: {plan.answer}.</think>\n<answer> {plan.answer} </answer>"
    # Each turn counts its searches (recipe 4): "Search 1 of 2: A", "… Search 2 of 2: B", then "That was search 2
    # of 2. So the answer is …". Recipe 2 gave every turn the same words and recipe 3 said "Next I need X" / "I
    # have found enough"; with either, the 135M model could not tell its last search from the others and went on
    # searching (16-18 of 40 unseen rollouts ran out of turns, 10-11 with a <search> in the final turn). A count
    # it writes itself says when to answer whatever the passages held. Measured: the count is learnt, the format
    # is not (format-ok 0.475): the invalid rollouts copy their previous turn after <information> (docs/warm_start.md).
    n = len(plan.hops)
    known = ""
    if k > 0:
        words = SEARCH_R1_CONCLUSION_WORDS
        known = conclusion_from(_observation(so_far), plan.hops[k - 1][0], plan.question.text, words) + " "
    if k < n:
        title, query = plan.hops[k]
        lead = f"This needs {n} searches. " if k == 0 else known
        return f"<think>{lead}Search {k + 1} of {n}: {title}.</think>\n<search> {query} </search>"
    return (
        f"<think>{known}That was search {n} of {n}. So the answer is {plan.answer}.</think>\n"
        f"<answer> {plan.answer} </answer>"
    )


def _hiprag_turn(plan: Plan, k: int, so_far: str) -> str:
    # Turns alternate: a step's reasoning + search (ends at </search>), then its conclusion (</conclusion>).
    if not plan.hops:
        if k == 0:
            return (
                f"This is common knowledge, so I answer without searching.</reasoning>\n"
                f"    <conclusion>The answer is {plan.answer}.</conclusion>"
            )
        return f"\n</think>\n<answer>{plan.answer}</answer>"
    hop, closing = divmod(k, 2)
    if hop >= len(plan.hops):
        return f"\n</think>\n<answer>{plan.answer}</answer>"
    title, query = plan.hops[hop]
    if closing:
        return f"{conclusion_from(_observation(so_far), title, plan.question.text)}</conclusion>"
    opening = "" if hop == 0 else "\n<step>\n    <reasoning>"
    return f"{opening}I need to find information about {title}.</reasoning>\n    <search>{query}</search>"


def _searchp1_turn(plan: Plan, k: int, so_far: str) -> str:
    if not plan.hops:
        return (
            f" This is common knowledge; no search is needed. </reasoning>\n<answer> {plan.answer} </answer>"
        )
    if k == 0:
        steps = " ".join(f"{i}. Find information about {t}." for i, (t, _) in enumerate(plan.hops, start=1))
        return f" I need to: {steps} </reasoning>\n<tool_call> {plan.hops[0][1]} </tool_call>"
    if k < len(plan.hops):
        return f"<tool_call> {plan.hops[k][1]} </tool_call>"
    known = conclusion_from(_observation(so_far), plan.hops[-1][0], plan.question.text)
    return (
        f"<reasoning> {known} So the answer is {plan.answer}. </reasoning>\n<answer> {plan.answer} </answer>"
    )


def _tiresrag_turn(plan: Plan, k: int, so_far: str) -> str:
    # The prompt ends with "<think>": the first turn starts inside the think block.
    if not plan.hops:
        return f" This is common knowledge: {plan.answer}. </think>\n<answer> {plan.answer} </answer>"
    known = ""
    if k > 0:
        known = conclusion_from(_observation(so_far), plan.hops[k - 1][0], plan.question.text) + " "
    opening = "" if k == 0 else "<think>"
    if k < len(plan.hops):
        title, query = plan.hops[k]
        return (
            f"{opening} {known}I need to find information about {title}. </think>\n<search> {query} </search>"
        )
    return f"{opening} {known}So the answer is {plan.answer}. </think>\n<answer> {plan.answer} </answer>"


TURNS: dict[str, Callable[[Plan, int, str], str]] = {
    "search_r1": _searchr1_turn,
    "autosearch": _searchr1_turn,  # AutoSearch trains on Search-R1's prompt and tags (agent.rollout_methods)
    "hiprag": _hiprag_turn,
    "search_p1": _searchp1_turn,
    "tiresrag": _tiresrag_turn,
}
