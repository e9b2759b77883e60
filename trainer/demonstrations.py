"""Warm-start demonstrations: each method's own format, written through the real rollout loop and retriever.

A demonstration is what a competent agent would write for a question whose supporting facts are known (the
dataset's ``metadata.supporting_titles``): one search per supporting fact, its query written from the fact's title
and the question, the passages the real retriever returns for that query, a short conclusion taken from those
passages, and the gold answer. Questions marked as single-hop common knowledge get a *no-search* demonstration
(HiPRAG's point: the agent must also see when not to search); see :func:`needs_search`.

The model's turns are played by :class:`ScriptBackend` inside :func:`agent.rollout.run_rollouts` with the method's
own loop (:data:`agent.rollout_methods.METHODS`), so prompts, forced prefixes, observation wrappers and retrieved
passages are byte-identical to what an RL rollout sees, and the segments say which tokens are the model's (trained
on) and which the environment's (masked, as in RL). Every demonstration is parsed in scoring's paper mode and
kept only when valid.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from agent.backends import Generation, Message, chatml, cut_at_stop
from agent.rollout import PAPER_CONFIGS, Question, Rollout, RolloutConfig, run_rollouts
from agent.rollout_methods import METHODS
from retrieval.searcher import Searcher
from scoring.formats import parse
from scoring.metrics import normalize_answer

_WORD = re.compile(r"[^\W_][\w'\-]*")  # Unicode letters: "Seán" is one word, not "Se" and "n"
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_STOPWORDS = frozenset(
    "a an and are as at be by did do does for from had has have he her his how in is it its of on or she that the "
    "their them they this to was were what when where which who whom whose why will with".split()
)
# "Doc 1(Title: Mario Costa (director)) text": a title may hold one level of parentheses.
_PASSAGE = re.compile(r"Doc \d+\(Title: ((?:[^()]|\([^()]*\))*)\)(.*?)(?=Doc \d+\(Title: |$)", re.S)
_CLAUSE_WORDS = frozenset("and but which who whom where while whose".split())
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


@dataclass(frozen=True, slots=True)
class Plan:
    """What a demonstration of one question says: the searches (title, query) in order, and the answer."""

    question: Question
    hops: tuple[tuple[str, str], ...]  # (supporting title, query); empty: a no-search demonstration
    answer: str
    redundant: str = (
        ""  # the kind of its redundant last search (REDUNDANT_KINDS), or "" when every search is needed
    )


# A redundant search, the controlled test of a process reward's mechanism (docs/warm_start.md): ``repeat`` asks the
# first hop's query again, word for word; ``known`` asks for the first hop's fact by its title alone, which the
# first search's passages already gave.
REDUNDANT_KINDS = ("repeat", "known")


def with_redundant_search(plan: Plan, kind: str) -> Plan:
    """``plan`` with one redundant search after its needed ones (``kind``: one of :data:`REDUNDANT_KINDS`); the
    answer is unchanged, so an outcome reward cannot tell the two demonstrations apart and a process reward can."""
    if not plan.hops or kind not in REDUNDANT_KINDS:
        raise ValueError(f"a redundant search needs a searched plan and a kind in {REDUNDANT_KINDS}")
    title, query = plan.hops[0]
    return replace(plan, hops=(*plan.hops, (title, query if kind == "repeat" else title)), redundant=kind)


@dataclass(slots=True)
class Demonstration:
    method: str
    question_id: str
    searches: int
    rollout: Rollout
    valid: bool
    error: str = ""
    redundant: str = ""  # the plan's redundant search (REDUNDANT_KINDS), or ""
    prompt: str = field(init=False)

    def __post_init__(self) -> None:
        self.prompt = self.rollout.prompt


def content_words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text) if w.lower() not in _STOPWORDS]


def needs_search(row: Mapping[str, Any]) -> bool:
    """The no-search rule: a question needs no search when its dataset marks it as single-hop common knowledge
    (``metadata.single_hop_common_knowledge``, e.g. ``demo/common_knowledge.jsonl``, or a ``*_single`` data
    source such as the demo's) or when its gold answer appears in the question itself and it is not a
    comparison (which still needs the facts of both sides). Everything else is searched, one hop per supporting
    title."""
    metadata = row.get("metadata") if isinstance(row.get("metadata"), Mapping) else {}
    assert isinstance(metadata, Mapping)
    if metadata.get("single_hop_common_knowledge") or str(metadata.get("data_source", "")).endswith(
        "_single"
    ):
        return False
    question = normalize_answer(str(row.get("question", "")))
    golds = [normalize_answer(str(g)) for g in row.get("golden_answers") or ()]
    in_question = any(g and g not in ("yes", "no") and f" {g} " in f" {question} " for g in golds)
    comparison = metadata.get("type") == "comparison" or " or " in f" {question} "
    return not (in_question and not comparison)


def plan_for(row: Mapping[str, Any]) -> Plan | None:
    """The demonstration plan of a FlashRAG question row, or ``None`` when it cannot be demonstrated (no answer,
    or a question that needs search but names no supporting titles)."""
    golds = [str(g) for g in row.get("golden_answers") or () if str(g).strip()]
    if not golds or not str(row.get("question", "")).strip():
        return None
    question = Question(
        id=str(row.get("id", "")),
        text=str(row["question"]).strip(),
        golds=tuple(golds),
        dataset=str((row.get("metadata") or {}).get("data_source", "")),
    )
    if not needs_search(row):
        return Plan(question, (), golds[0])
    titles = [str(t) for t in (row.get("metadata") or {}).get("supporting_titles") or () if str(t).strip()]
    if not titles:
        return None
    # The bridge entity the question names goes first: the second hop is found through the first one's facts.
    asked = {w.lower() for w in content_words(question.text)}
    titles.sort(key=lambda t: -len({w.lower() for w in content_words(t)} & asked))
    hops = tuple((title, query_for(title, question.text)) for title in dict.fromkeys(titles))
    return Plan(question, hops, golds[0])


def query_for(title: str, question: str) -> str:
    """A search query written from the fact's title and the question: the title, then up to three of the
    question's content words it does not already hold."""
    have = {w.lower() for w in content_words(title)}
    extra = [w for w in content_words(question) if w.lower() not in have][:3]
    return " ".join([title, *extra]).strip()


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
        while len(words) > 1 and words[-1].lower().strip(",;:") in _STOPWORDS:
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


class ScriptBackend:
    """A :class:`~agent.backends.GenerationBackend` whose replies are the demonstrations' turns.

    ``generate`` receives prompt + response so far; the question whose prompt it starts with says which plan to
    follow, and the number of model turns already taken which turn. Tokenising (chat template, truncation of
    observations, token counts) is the real tokenizer's, so observations are cut exactly as in training.
    """

    name = "demonstrations"

    def __init__(self, tokenizer: Any, method: str, plans: Sequence[Plan]) -> None:
        self.tokenizer = tokenizer
        self.turn = TURNS[method]
        self.plans = list(plans)
        self.prompts: dict[str, Plan] = {}  # rollout prompt → plan (set by :func:`build_demonstrations`)
        self.turns_taken: dict[str, int] = {}

    def generate(
        self,
        prompts: Sequence[str],
        *,
        stop: Sequence[str],
        max_new_tokens: int,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
    ) -> list[Generation]:
        out = []
        for text in prompts:
            prompt = max((p for p in self.prompts if text.startswith(p)), key=len)
            plan = self.prompts[prompt]
            k = self.turns_taken.get(prompt, 0)
            self.turns_taken[prompt] = k + 1
            reply, reason = cut_at_stop(self.turn(plan, k, text[len(prompt) :]), stop)
            ids = tuple(self.tokenizer.encode(reply, add_special_tokens=False))
            out.append(
                Generation(
                    reply,
                    "stop" if reason else "eos",
                    reason,
                    token_ids=ids,
                    prompt_tokens=0,
                    completion_tokens=len(ids),
                )
            )
        return out

    def apply_chat_template(self, messages: Sequence[Message]) -> str:
        if getattr(self.tokenizer, "chat_template", None):
            return str(
                self.tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)
            )
        return chatml(messages)

    def truncate_tokens(self, text: str, max_tokens: int) -> str:
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        return text if len(ids) <= max_tokens else str(self.tokenizer.decode(ids[:max_tokens]))

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False))


def demonstration_config(method: str, *, max_obs_tokens: int, topk: int, max_turns: int) -> RolloutConfig:
    """The method's paper settings with the training run's observation budget and top-k, no token limit on the
    scripted turns (they are short), and room for every hop (a plan with more hops than the turn budget is
    dropped by :func:`build_demonstrations`)."""
    return replace(
        PAPER_CONFIGS[method],
        max_obs_tokens=max_obs_tokens,
        topk=topk,
        max_turns=max_turns,
        max_new_tokens=10_000,
        max_rollout_tokens=0,
        reflect=False,
    )


def build_demonstrations(
    method: str,
    plans: Sequence[Plan],
    searcher: Searcher,
    tokenizer: Any,
    *,
    max_obs_tokens: int = 200,
    topk: int = 3,
    max_turns: int = 4,
    max_turn_tokens: int = 0,
) -> list[Demonstration]:
    """Roll out ``plans`` with the method's loop, the real ``searcher`` and scripted turns; parse each. With
    ``max_turn_tokens``, a demonstration with a longer model turn is invalid: the training run's budget would cut
    that turn, so the model must not learn it."""
    loop = METHODS[method]()
    config = demonstration_config(method, max_obs_tokens=max_obs_tokens, topk=topk, max_turns=max_turns)
    usable = [p for p in plans if len(p.hops) <= max_turns]
    backend = ScriptBackend(tokenizer, method, usable)
    questions = []
    for plan in usable:
        # The loop's own start() writes the prompt; learn it here so the backend can tell the rollouts apart.
        probe = _probe_prompt(loop, backend, config, plan.question)
        backend.prompts[probe] = plan
        questions.append(plan.question)
    rollouts = asyncio.run(run_rollouts(backend, searcher, loop, questions, config))
    out = []
    for plan, rollout in zip(usable, rollouts, strict=True):
        trajectory = parse(rollout.format, rollout.text)
        error = "" if trajectory.valid else str(trajectory.error)
        if (
            trajectory.valid
            and trajectory.answer is not None
            and trajectory.answer.strip() != plan.answer.strip()
        ):
            error = f"answer {trajectory.answer!r} is not the plan's {plan.answer!r}"
        longest = max((len(g.token_ids or ()) for g in rollout.segments if g.source == "model"), default=0)
        if not error and max_turn_tokens and longest > max_turn_tokens:
            error = f"a model turn of {longest} tokens exceeds the turn budget ({max_turn_tokens})"
        out.append(
            Demonstration(
                method,
                plan.question.id,
                rollout.n_searches,
                rollout,
                not error,
                error,
                redundant=plan.redundant,
            )
        )
    return out


def _probe_prompt(loop: Any, backend: ScriptBackend, config: RolloutConfig, question: Question) -> str:
    from agent.rollout import LoopState
    from agent.rollout import Rollout as AgentRollout

    state = LoopState(AgentRollout(question, loop.name, loop.format, prompt=""))
    loop.start(state, backend, config)
    return state.rollout.prompt


def tokenized(demonstration: Demonstration, tokenizer: Any, *, eos: bool = True) -> dict[str, list[int]]:
    """``input_ids`` and ``labels`` for SFT: the prompt and every environment segment get -100 (no loss), the
    model's segments their own ids — the same ids and the same mask an RL rollout of this text gets
    (trainer.rollout.env_mask). An end-of-sequence token closes the response, trained on, so the model stops."""
    rollout = demonstration.rollout
    input_ids = list(tokenizer.encode(rollout.prompt, add_special_tokens=False))
    labels = [-100] * len(input_ids)
    for segment in rollout.segments:
        ids = list(segment.token_ids or tokenizer.encode(segment.text, add_special_tokens=False))
        input_ids.extend(ids)
        labels.extend(ids if segment.source == "model" else [-100] * len(ids))
    if eos and tokenizer.eos_token_id is not None:
        input_ids.append(int(tokenizer.eos_token_id))
        labels.append(int(tokenizer.eos_token_id))
    return {"input_ids": input_ids, "labels": labels}
