"""Each method's turn rules for :func:`agent.rollout.run_rollouts`: prompt, boundary tags, observations, budgets.

Prompts and observation wrappers come from ``scoring`` (:mod:`scoring.observations`, :mod:`scoring.judging`,
:mod:`scoring.formats`) so that rollouts write exactly what the parsers read. Where a paper's pseudo-code is loose,
the choice is documented on the class.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from agent.backends import Generation, GenerationBackend, first_stop
from agent.rollout import LoopState, RolloutConfig, finish, room_for_another_search
from retrieval.searcher import RetrievedDocument
from scoring.formats.searchr1 import make_prefix, prepare_question
from scoring.judging.hiprag import FORCED_PREFIX, between, initial_prompt
from scoring.judging.searchp1 import INFERENCE_RESPONSE_PREFIX, inference_messages
from scoring.observations import (
    SEARCHR1_INVALID_ACTION,
    hiprag_context_block,
    information_block,
    parse_action,
    passages_to_string,
)

# TIRESRAG-R1's policy system prompt (OpenRLHF-RAG prompts_dataset.py, chat path; also FlashRAG eval prompt_type
# "ours"), ../shared/reference/prompts/tiresrag_train_chat_system_prompt.txt verbatim: the runs of spaces are the
# source's backslash line continuations. scoring/ has no policy prompt of TIRESRAG yet; it belongs beside
# scoring.formats.searchr1.SEARCHR1_INSTRUCTION and should move there.
TIRESRAG_SYSTEM_PROMPT = (
    "You are a helpful assistant. Answer the given question.             You must reason **clearly and "
    "completely** inside <think> and </think> before providing any final answer.             Always identify and "
    "verify all key entities (e.g., person names, locations, dates, awards) mentioned in the question.          "
    "   If you are uncertain about an entity or fact, or if the question requires external knowledge, you may use "
    "            <search>your query</search>, and the top search results will be returned between <information> "
    "and </information>. Carefully read and reflect on each newly retrieved piece of information.             You "
    "can search as many times as you want.             When reasoning, you must ensure your reasoning path aligns "
    "strictly with the evidence.             After reasoning, before providing your final answer, rethink it to "
    "make sure the answer is exactly correct for the original question.             Use the most accurate span "
    "from the evidence when possible.             Only after satisfying all the above, give the final answer inside "
    "<answer> and </answer>. For example, <answer> Beijing </answer>.             After outputting the final answer "
    "in <answer>  </answer>, You have one chance to reflect on the answer. If you choose not to reflect, nothing "
    "further needs to be done.            Otherwise, you can then re-examine your thinking process, the information "
    "obtained, and even search for more information to verify your previous answer or correct the previous "
    "answer. Remember, after reflection ends, you should output the  answer in <answer>  </answer>."
)
TIRESRAG_PROMPT_SUFFIX = "<think>"  # prompts_dataset.py appends it after the chat template (training layout)

SEARCH_END, ANSWER_END, CONCLUSION_END, TOOL_CALL_END = (
    "</search>",
    "</answer>",
    "</conclusion>",
    "</tool_call>",
)


def boundary(generation: Generation, stop: Sequence[str]) -> str | None:
    """Which boundary tag ended this generation (from the backend, else the first one in its text)."""
    if generation.stop_reason is not None:
        return generation.stop_reason
    found = first_stop(generation.text, stop)
    return None if found is None else found[1]


def _passages(
    documents: Sequence[RetrievedDocument], backend: GenerationBackend, config: RolloutConfig
) -> str:
    return backend.truncate_tokens(passages_to_string(d.contents for d in documents), config.max_obs_tokens)


def _chat(backend: GenerationBackend, config: RolloutConfig, messages: list[dict[str, str]]) -> str:
    if config.use_chat_template:
        return backend.apply_chat_template(messages)
    return "\n\n".join(m["content"] for m in messages) + "\n"


class SearchR1Loop:
    """Search-R1's ``LLMGenerationManager.run_llm_loop`` (REFERENCE.md §c): ``max_turns`` turns that may search,
    then one final turn whose search is not executed. Each turn is cut at its first ``</search>``/``</answer>``
    (stop strings, same cut as ``truncate_response``); its action is :func:`parse_action`'s; no action gets the
    invalid-action notice and another turn."""

    name = "search_r1"
    format = "search_r1"

    def start(self, state: LoopState, backend: GenerationBackend, config: RolloutConfig) -> None:
        user = make_prefix(prepare_question(state.rollout.question.text))
        state.rollout.prompt = _chat(backend, config, [{"role": "user", "content": user}])

    def stop(self, state: LoopState) -> tuple[str, ...]:
        return (SEARCH_END, ANSWER_END)

    def on_generation(self, state: LoopState, generation: Generation, config: RolloutConfig) -> str | None:
        state.steps += 1
        action, content = parse_action(generation.text)
        if action == "answer":
            finish(state, "answer", finished=True)
            return None
        if state.steps > config.max_turns:  # the final turn (do_search=False)
            finish(state, "budget", finished=False)
            return None
        if action == "search":
            if not room_for_another_search(state, config):
                state.steps = max(state.steps, config.max_turns)  # the next turn is the final one
            return content
        state.rollout.add_env(SEARCHR1_INVALID_ACTION)
        return None

    def on_documents(
        self,
        state: LoopState,
        documents: Sequence[RetrievedDocument],
        backend: GenerationBackend,
        config: RolloutConfig,
    ) -> None:
        state.rollout.add_env(information_block(_passages(documents, backend, config)))


class AutoSearchLoop(SearchR1Loop):
    """AutoSearch reuses Search-R1's loop and prompt (its training data are Search-R1's parquet files). The
    intermediate answers after each retrieval step are generated afterwards, in one batch, by
    :func:`agent.judges.autosearch_intermediate_answers` — the policy is fixed during a rollout and each prefix
    is final once written, so this equals answering after each search, with larger batches."""

    name = "autosearch"
    format = "autosearch"


class HiPRAGLoop:
    """HiPRAG Algorithm 1 (step budget B = ``max_turns``) from the released ``initial_prompt`` and forced prefix.

    Boundaries ``</search>`` (→ ``<context>`` + opened ``<conclusion>``, :func:`hiprag_context_block`),
    ``</conclusion>`` (→ ``</step>``, i ← i + 1) and ``</answer>`` (done). Read loosely where the pseudo-code
    would make early answers impossible: after ``</step>`` the model writes the next ``<step>`` or ``</think>``
    itself (line 16 forcing ``<step><reasoning>`` would leave no way to stop before B steps; ``force_next_step``
    restores it). Line 20's ``</think>`` is appended only when the model has not answered; a generation that ends
    without a boundary (EOS, length) goes to lines 20–22 as an exhausted budget does.
    """

    name = "hiprag"
    format = "hiprag"

    def start(self, state: LoopState, backend: GenerationBackend, config: RolloutConfig) -> None:
        full = initial_prompt(state.rollout.question.text)
        state.rollout.prompt = full[: -len(FORCED_PREFIX)]
        state.rollout.add_env(FORCED_PREFIX)  # environment-written: masked from the policy loss
        state.steps = 1

    def stop(self, state: LoopState) -> tuple[str, ...]:
        if state.phase == "answer":
            return (ANSWER_END,)
        return (SEARCH_END, CONCLUSION_END, ANSWER_END)

    def on_generation(self, state: LoopState, generation: Generation, config: RolloutConfig) -> str | None:
        tag = boundary(generation, self.stop(state))
        if state.phase == "answer":
            finish(state, "answer" if tag else generation.finish_reason, finished=tag == ANSWER_END)
            return None
        if tag == ANSWER_END:
            finish(state, "answer", finished=True)
            return None
        if tag == SEARCH_END:
            queries = between(state.rollout.text, "<search>", "</search>")
            return queries[-1].strip() if queries else ""
        if tag == CONCLUSION_END:
            state.rollout.add_env("\n</step>")
            state.steps += 1
            if state.steps > config.max_turns or not room_for_another_search(state, config):
                self._final_answer(state)
            elif config.force_next_step:
                state.rollout.add_env("\n<step>\n    <reasoning>")
            return None
        self._final_answer(state)
        return None

    def _final_answer(self, state: LoopState) -> None:
        text = state.rollout.text
        closing = "" if text.rstrip().endswith("</think>") else "\n</think>"
        state.rollout.add_env(f"{closing}\n<answer>")
        state.phase = "answer"

    def on_documents(
        self,
        state: LoopState,
        documents: Sequence[RetrievedDocument],
        backend: GenerationBackend,
        config: RolloutConfig,
    ) -> None:
        state.rollout.add_env(hiprag_context_block(_passages(documents, backend, config)))


def tool_call_query(text: str) -> str:
    """The query of the last ``<tool_call>``: plain text, or a JSON call with a ``query`` (maybe in
    ``arguments``, maybe itself a JSON string)."""
    calls = between(text, "<tool_call>", "</tool_call>")
    content = calls[-1].strip() if calls else ""
    try:
        value = json.loads(content)
    except ValueError:
        return content
    for holder in (value, value.get("arguments") if isinstance(value, dict) else None):
        if isinstance(holder, str):
            try:
                holder = json.loads(holder)
            except ValueError:
                continue
        if isinstance(holder, dict) and isinstance(holder.get("query"), str):
            return str(holder["query"]).strip()
    return content


class SearchP1Loop:
    """Search-P1 Algorithm 2: Fig. 8 prompt, response prefilled with ``<reasoning>``; each turn ends at
    ``</tool_call>`` (→ ``<tool_response>`` with the passages, t ← t + 1) or ``</answer>``; after B actions, or a
    turn with neither (which Algorithm 2 would repeat forever), ``<answer>`` is appended and generated."""

    name = "search_p1"
    format = "search_p1"

    def start(self, state: LoopState, backend: GenerationBackend, config: RolloutConfig) -> None:
        state.rollout.prompt = _chat(backend, config, inference_messages(state.rollout.question.text))
        state.rollout.add_env(INFERENCE_RESPONSE_PREFIX)

    def stop(self, state: LoopState) -> tuple[str, ...]:
        return (ANSWER_END,) if state.phase == "answer" else (TOOL_CALL_END, ANSWER_END)

    def on_generation(self, state: LoopState, generation: Generation, config: RolloutConfig) -> str | None:
        tag = boundary(generation, self.stop(state))
        if state.phase == "answer" or tag == ANSWER_END or "<answer>" in generation.text:
            finish(
                state, "answer" if tag == ANSWER_END else generation.finish_reason, finished=tag == ANSWER_END
            )
            return None
        if tag == TOOL_CALL_END:
            return tool_call_query(generation.text)
        state.rollout.add_env("\n<answer>")
        state.phase = "answer"
        return None

    def on_documents(
        self,
        state: LoopState,
        documents: Sequence[RetrievedDocument],
        backend: GenerationBackend,
        config: RolloutConfig,
    ) -> None:
        state.steps += 1
        passages = _passages(documents, backend, config).strip()
        state.rollout.add_env(f"\n<tool_response>\n{passages}\n</tool_response>\n")
        if state.steps >= config.max_turns:
            state.rollout.add_env("<answer>")
            state.phase = "answer"


def tiresrag_information_block(
    documents: Sequence[RetrievedDocument], backend: GenerationBackend, config: RolloutConfig
) -> str:
    """TIRESRAG's observation (REFERENCE.md §2.6): ``\\n\\n<information>\\n(1)doc\\n(2)doc…</information>\\n\\n``."""
    docs = "".join(f"({i}){d.contents}\n" for i, d in enumerate(documents, start=1))
    return f"\n\n<information>\n{backend.truncate_tokens(docs, config.max_obs_tokens)}</information>\n\n"


class TiresragLoop:
    """TIRESRAG-R1's rollout (REFERENCE.md §2.6): system prompt + question, ``<think>`` appended to the prompt;
    turns end at ``</search>`` (≤ ``max_turns`` retrieval rounds; a search past the budget ends the rollout) or
    ``</answer>``. With ``reflect`` the model then has its one reflection round: it may stop (EOS), or think,
    search and answer again; the second ``</answer>`` ends it. Evaluation stops at the first answer
    (``reflect=False``), as the released FlashRAG evaluation does."""

    name = "tiresrag"
    format = "tiresrag"

    def start(self, state: LoopState, backend: GenerationBackend, config: RolloutConfig) -> None:
        messages = [
            {"role": "system", "content": TIRESRAG_SYSTEM_PROMPT},
            {"role": "user", "content": state.rollout.question.text},
        ]
        state.rollout.prompt = _chat(backend, config, messages) + TIRESRAG_PROMPT_SUFFIX

    def stop(self, state: LoopState) -> tuple[str, ...]:
        return (SEARCH_END, ANSWER_END)

    def on_generation(self, state: LoopState, generation: Generation, config: RolloutConfig) -> str | None:
        tag = boundary(generation, self.stop(state))
        if tag == SEARCH_END:
            if state.rollout.n_searches >= config.max_turns:
                finish(state, "budget", finished=state.answers > 0)
                return None
            queries = between(generation.text, "<search>", "</search>")
            return queries[-1].strip() if queries else ""
        if tag == ANSWER_END:
            state.answers += 1
            if state.answers >= 2 or not config.reflect:
                finish(state, "answer", finished=True)
            return None
        # EOS or length: after a first answer this is the model declining to reflect.
        finish(state, "answer" if state.answers else generation.finish_reason, finished=state.answers > 0)
        return None

    def on_documents(
        self,
        state: LoopState,
        documents: Sequence[RetrievedDocument],
        backend: GenerationBackend,
        config: RolloutConfig,
    ) -> None:
        state.rollout.add_env(tiresrag_information_block(documents, backend, config))


METHODS: dict[str, type[SearchR1Loop] | type[HiPRAGLoop] | type[SearchP1Loop] | type[TiresragLoop]] = {
    "search_r1": SearchR1Loop,
    "autosearch": AutoSearchLoop,
    "hiprag": HiPRAGLoop,
    "search_p1": SearchP1Loop,
    "tiresrag": TiresragLoop,
}
