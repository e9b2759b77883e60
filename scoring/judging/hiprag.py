"""HiPRAG's judge prompts, the judge messages it sends, and how a judge reply becomes a verdict (HiPRAG Sec. 3.2).

Over-search (Sec. 3.2, Fig. 5): the search step's query q_i is put to the policy model as a standalone question
(:func:`regeneration_prompt`); a judge compares the step's conclusion o_i with the regenerated answer o'_i.
Equivalent ⇒ the search was redundant ⇒ over-search. Under-search (Fig. 6): a verifier checks the reasoning and
conclusion of a non-search step; incorrect ⇒ under-search.

The prompt strings are the released ones (``prompt.py`` / ``qa_em_format.py`` at 3e640365). Against the paper's
figures: Fig. 5 is the same text. Fig. 6 sets "Factual Accuracy:" and "Internal Logic:" in bold (``**…**``) where
the code has plain text, and the code ends with a newline. Fig. 4 abbreviates the examples of
``AGENT_PROMPT_V2_SHORT`` ("Your detailed analysis..." for "Your detailed analysis of what you know and what you
need to find out.", "[Provided by system]" for "[This will be provided by the system after your search]", "Your
conclusion for this step." for the two longer conclusions); "***** Output Format Specification****" is the PDF's
rendering of "**## Output Format Specification**". The released strings are used everywhere, paper mode included.
Judge models: the paper uses GPT-4.1 mini (over-search) and GPT-5 mini (under-search); the released code uses
gpt-4.1-nano for both.

Verdicts: paper mode reads the LAST ``<answer>…</answer>`` of the reply and accepts exactly "True" or "False"
(case-insensitive, after stripping); anything else is ``Verdict.UNPARSEABLE`` — "Not True" is not true, a reply
without the tag is unparseable. The reference twins keep the released behaviour: ``"True" in <last answer>``
(case-sensitive substring, so "Not True" counts and "true" does not), and any exception (no tag, API error) means
"not flagged".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from scoring.verdicts import Verdict

PAPER_OVER_SEARCH_JUDGE_MODEL = "gpt-4.1-mini"  # HiPRAG Sec. 4.3
PAPER_UNDER_SEARCH_JUDGE_MODEL = "gpt-5-mini"  # HiPRAG Sec. 4.3
REFERENCE_JUDGE_MODEL = "gpt-4.1-nano"  # qa_em_format.py, both detectors

AGENT_PROMPT_V2_SHORT = """Answer user questions by thinking step-by-step. Your entire reasoning process must be encapsulated within a single <think></think> block, which contains one or more <step></step> blocks. Each step must begin with your analysis in <reasoning>. If you identify a knowledge gap, you may use <search>query</search> to query a search engine; search results will then be provided in a <context> tag. Every step must end with a <conclusion> summarizing what you learned in that step. After your thinking process is complete, provide the final, conclusive answer inside an <answer> tag placed immediately after the closing </think> tag. You can use as many steps as you need. Ensure all XML tags are properly formed and nested.

**## Output Format Specification**

Your output must follow this overall structure. The `<think>` block contains all the steps, and the `<answer>` block follows it.

<think>
<step>
    ...
</step>
<step>
    ...
</step>
</think>
<answer>Your final, conclusive answer to the user's question.</answer>

**## Step Formats (to be used inside <think>)**

Format 1: Step with a Search

<step>
    <reasoning>Your detailed analysis of what you know and what you need to find out.</reasoning>
    <search>The precise search query you will use.</search>
    <context>[This will be provided by the system after your search]</context>
    <conclusion>Your conclusion or answer to the reasoning and search query at this step.</conclusion>
</step>

Format 2: Step without a Search (Internal Reasoning)

<step>
    <reasoning>Your detailed analysis of what you know and what you need to find out.</reasoning>
    <conclusion>Your conclusion or answer to the reasoning at this step.</conclusion>
</step>
"""

SEARCH_STEP_VERIFY_PROMPT_V1 = 'You are an expert in Natural Language Understanding and Semantic Analysis. Your goal is to determine if these two statements are semantically equivalent—that is, if they mean the same thing and convey the same core information. Provide your answers with a single boolean value "True" or "False" in the tag <answer></answer> (e.g. <answer>True</answer> or <answer>False</answer>).'

NON_SEARCH_STEP_VERIFY_PROMPT_V1 = """You are an expert Fact-Checker and Logic Verifier. Your task is to evaluate a single, isolated reasoning step from an AI agent.

This step was generated without using a search tool. Your goal is to determine if the agent made a mistake by not searching, based only on the information within this single step and your own general knowledge.

Analyze the provided step by asking two questions:
1. Factual Accuracy: Is the statement in the <reasoning></reasoning> and <conclusion></conclusion> factually correct?
2. Internal Logic: Does the <conclusion></conclusion> logically follow from the <reasoning></reasoning> provided within this same step?

If both questions are answered correctly, provide your answers with a single boolean value "True" or "False" in the tag <answer></answer> (e.g. <answer>True</answer> or <answer>False</answer>).
"""

REGENERATION_TEMPLATE = (
    "Please answer the following question or provide relevant information to the statement: {query}"
)
QWEN_DEFAULT_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
FORCED_PREFIX = "\n<think>\n<step>\n    <reasoning>"  # inference.py opens the first step for the model


def between(text: str, start: str, end: str) -> list[str]:
    """Every ``start`` … ``end`` span, left to right, non-overlapping (HiPRAG ``extract_str_between``)."""
    found: list[str] = []
    position = 0
    while True:
        open_at = text.find(start, position)
        if open_at == -1:
            return found
        open_at += len(start)
        close_at = text.find(end, open_at)
        if close_at == -1:
            return found
        found.append(text[open_at:close_at])
        position = close_at + len(end)


def qwen_chat(user: str, system: str = QWEN_DEFAULT_SYSTEM) -> str:
    """One user turn in Qwen2.5's chat layout, ready for the assistant (``add_generation_prompt=True``)."""
    return (
        f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n"
    )


def initial_prompt(question: str) -> str:
    """The text HiPRAG's ``inference.py`` starts generating from, with Qwen's chat template.

    The question is stripped and gets a "?" unless it ends with one; the forced prefix opens the first step. An
    empty question raises ``ValueError`` (the released code raises ``IndexError`` on ``question[-1]``).
    """
    question = question.strip()
    if not question:
        raise ValueError("empty question")
    if question[-1] != "?":
        question += "?"
    return qwen_chat(f"{AGENT_PROMPT_V2_SHORT}\nUser Question: {question}") + FORCED_PREFIX


def regeneration_prompt(query: str) -> str:
    """The user message that puts a search query to the policy model as a standalone question (HiPRAG Sec. 3.2)."""
    return REGENERATION_TEMPLATE.format(query=query)


def over_search_message(conclusion: str, regenerated: str) -> str:
    """Judge user message for over-search: is the step's conclusion o_i equivalent to the regenerated o'_i?"""
    return f"{SEARCH_STEP_VERIFY_PROMPT_V1}\n\nStatement 1: {conclusion}\n\nStatement 2: {regenerated}"


def under_search_message(step_content: str) -> str:
    """Judge user message for under-search: is this non-search step (its tagged text) correct?"""
    return f"{NON_SEARCH_STEP_VERIFY_PROMPT_V1}\n\nStep Content: {step_content}"


def regeneration_queries(prompt_and_response: str) -> list[str]:
    """The queries HiPRAG's ``RewardManager.__call__`` regenerates for one sample, deduplicated, sorted.

    All ``<search>`` contents (unstripped) of the LAST ``<think>`` … ``</think>`` span found by left-to-right
    scanning. With HiPRAG's prompt that span starts inside the prompt ("Step Formats (to be used inside <think>)"),
    so the prompt's example query "The precise search query you will use." is regenerated for every sample too.
    The released code dedupes a whole batch with ``set`` (unordered); sorting makes the result reproducible.
    """
    spans = between(prompt_and_response, "<think>", "</think>")
    return sorted(set(between(spans[-1], "<search>", "</search>"))) if spans else []


def batch_regeneration_queries(samples: Iterable[str]) -> list[str]:
    """:func:`regeneration_queries` over a batch (prompt+response strings), deduplicated across samples."""
    return sorted({query for sample in samples for query in regeneration_queries(sample)})


# --- verdicts, paper mode --------------------------------------------------------------------------------------


def _boolean_verdict(reply: str) -> Verdict:
    answers = between(reply, "<answer>", "</answer>")
    if not answers:
        return Verdict.UNPARSEABLE
    word = answers[-1].strip().casefold()
    if word == "true":
        return Verdict.TRUE
    if word == "false":
        return Verdict.FALSE
    return Verdict.UNPARSEABLE


def parse_equivalence_verdict(reply: str) -> Verdict:
    """Fig. 5 judge reply → TRUE (the statements are equivalent), FALSE, or UNPARSEABLE.

    >>> parse_equivalence_verdict("<answer> true </answer>"), parse_equivalence_verdict("<answer>Not True</answer>")
    (<Verdict.TRUE: 'true'>, <Verdict.UNPARSEABLE: 'unparseable'>)
    """
    return _boolean_verdict(reply)


def parse_correctness_verdict(reply: str) -> Verdict:
    """Fig. 6 verifier reply → TRUE (the step is correct), FALSE, or UNPARSEABLE."""
    return _boolean_verdict(reply)


def over_search_verdict(reply: str) -> Verdict:
    """Over(s_i^R) as a verdict: TRUE = over-search (conclusion equivalent to the regenerated answer)."""
    return parse_equivalence_verdict(reply)


def under_search_verdict(reply: str) -> Verdict:
    """Under(s_i^NR) as a verdict: TRUE = under-search (the verifier found the step incorrect)."""
    correct = parse_correctness_verdict(reply)
    if correct is Verdict.TRUE:
        return Verdict.FALSE
    if correct is Verdict.FALSE:
        return Verdict.TRUE
    return correct


# --- verdicts and judge requests, reference variants (qa_em_format.py) -----------------------------------------


def _says_true_reference(reply: str | None) -> bool:
    """``"True" in extract_str_between(reply, "<answer>", "</answer>")[-1]``; raises as the released code did
    (``IndexError`` without a tag, ``AttributeError`` for a ``None`` reply = the API call failed)."""
    if reply is None:
        raise AttributeError("'NoneType' object has no attribute 'find'")
    return "True" in between(reply, "<answer>", "</answer>")[-1]


def over_search_flag_reference(reply: str | None) -> bool:
    """``test_oversearch_direct_async``'s verdict: over-searched iff the last answer contains "True"; any exception
    (no tag, ``None`` = API error) → False."""
    try:
        return _says_true_reference(reply)
    except (AttributeError, IndexError):
        return False


def under_search_flag_reference(reply: str | None) -> bool:
    """``test_undersearch_async``'s verdict: under-searched iff the last answer lacks "True" (so an empty
    ``<answer></answer>`` flags it); any exception → False."""
    try:
        return not _says_true_reference(reply)
    except (AttributeError, IndexError):
        return False


def over_search_message_reference(step_content: str, regenerated: Mapping[str, str]) -> str | None:
    """The judge message ``test_oversearch_direct_async`` sends for this step, or None when it sends none (and
    returns "not over-searched"): no ``<search>``/``<conclusion>`` pair, or the query was not regenerated.

    Query and conclusion are the LAST spans, unstripped; the query is looked up verbatim.
    """
    queries = between(step_content, "<search>", "</search>")
    conclusions = between(step_content, "<conclusion>", "</conclusion>")
    if not queries or not conclusions or queries[-1] not in regenerated:
        return None
    return over_search_message(conclusions[-1], regenerated[queries[-1]])
