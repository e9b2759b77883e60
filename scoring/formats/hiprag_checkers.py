"""HiPRAG's released format checkers and step splitter, reproduced bit for bit (reference variants).

HiPRAG (qualidea1217/HiPRAG at 3e640365) ships three checkers that disagree with each other and with the paper's
Algorithms 2–3 (which :mod:`scoring.formats.hiprag` implements as the default). REFERENCE.md §b describes them:

* :func:`check_format_optimized_reference` — ``check_full_response_format_optimized``. With
  ``reject_trailing_text=True`` it is the training checker of ``verl/utils/reward_score/qa_em_format.py`` (the
  F(T) used in training); with ``False`` it is the copy in ``reward.py`` whose "nothing after ``</answer>``" check is
  commented out. Everything after the LAST ``<think>`` is checked, so prompt text (and any text before the
  response's own ``<think>``) is ignored. Inside a step, text outside the tags is tolerated unless it holds both a
  ``<`` and a ``>``; a ``<search>`` written inside ``<reasoning>`` is tolerated; empty search or context fails.
* :func:`check_format_regex_reference` — ``check_full_response_format`` (regex version, used by ``analysis.py`` to
  skip invalid trajectories before OSR/USR): the tag sequence of each step must be exactly
  reasoning→search→context→conclusion or reasoning→conclusion, so a ``<search>`` inside the reasoning fails here.
* :func:`steps_reference` — ``get_steps_from_full_response``: the inner text of each ``<step>`` after the last
  ``<think>``, and the offset of its ``<step>`` tag.

The functions are this module's own code (the released code is not copied); the vectors in
``../shared/reference/hiprag_format.jsonl`` check that they behave the same.
"""

from __future__ import annotations

import re

_STEP_TAGS = ("reasoning", "search", "context", "conclusion")
_NON_SEARCH_TAGS = ("reasoning", "conclusion")


# --- check_full_response_format_optimized (qa_em_format.py / reward.py) --------------------------------------


def check_format_optimized_reference(full_response: str, *, reject_trailing_text: bool = True) -> bool:
    """HiPRAG ``check_full_response_format_optimized``; ``reject_trailing_text=False`` is the ``reward.py`` copy."""
    idx = full_response.rfind("<think>")
    if idx == -1:
        return False
    # The slice starts with "<think>", so strip() only trims the end and the "starts with <think>" test of the
    # released code always holds.
    response = full_response[idx:].strip()
    think_end = response.find("</think>")
    if think_end == -1:
        return False
    answer_section = response[think_end + 8 :].lstrip()
    if not answer_section.startswith("<answer>"):
        return False
    answer_end = answer_section.find("</answer>")
    if answer_end == -1:
        return False
    if reject_trailing_text and answer_section[answer_end + 9 :].strip():
        return False
    think_start = 7
    while think_start < think_end and response[think_start].isspace():
        think_start += 1
    think_content = response[think_start:think_end].rstrip()
    if "<step>" not in think_content or "</step>" not in think_content:
        return False
    position = 0
    while True:
        open_at = think_content.find("<step>", position)
        if open_at == -1:
            return True
        close_at = think_content.find("</step>", open_at)
        if close_at == -1:
            return False
        if not _validate_step_optimized(think_content[open_at + 6 : close_at]):
            return False
        position = close_at + 7


def _validate_step_optimized(step: str) -> bool:
    reasoning_open = step.find("<reasoning>")
    if reasoning_open == -1:
        return False
    reasoning_close = step.find("</reasoning>", reasoning_open)
    if reasoning_close == -1:
        return False
    after_reasoning = step[reasoning_close + 12 :]
    if "<search>" in after_reasoning:
        # Format 1: reasoning, search, context, conclusion; search and context non-empty.
        search_open = after_reasoning.find("<search>")
        search_close = after_reasoning.find("</search>", search_open)
        if search_close == -1 or not after_reasoning[search_open + 8 : search_close].strip():
            return False
        after_search = after_reasoning[search_close + 9 :]
        context_open = after_search.find("<context>")
        if context_open == -1:
            return False
        context_close = after_search.find("</context>", context_open)
        if context_close == -1 or not after_search[context_open + 9 : context_close].strip():
            return False
        after_context = after_search[context_close + 10 :]
        conclusion_open = after_context.find("<conclusion>")
        if conclusion_open == -1 or after_context.find("</conclusion>", conclusion_open) == -1:
            return False
        required: tuple[str, ...] = _STEP_TAGS
    else:
        conclusion_open = after_reasoning.find("<conclusion>")
        if conclusion_open == -1 or after_reasoning.find("</conclusion>", conclusion_open) == -1:
            return False
        required = _NON_SEARCH_TAGS
    # The released count_tags_optimized records the number of OPENING tags (closing ones are not compared).
    if any(step.count(f"<{tag}>") != 1 for tag in required):
        return False
    return not _has_extra_tags(step, required)


def _has_extra_tags(step: str, tags: tuple[str, ...]) -> bool:
    """Delete every ``<tag>…</tag>`` pair (tag by tag, leftmost first); anything left holding both ``<`` and ``>``
    counts as an extra tag."""
    cleaned = step
    for tag in tags:
        open_tag, close_tag = f"<{tag}>", f"</{tag}>"
        while True:
            open_at = cleaned.find(open_tag)
            if open_at == -1:
                break
            close_at = cleaned.find(close_tag, open_at)
            if close_at == -1:
                break
            cleaned = cleaned[:open_at] + cleaned[close_at + len(close_tag) :]
    return "<" in cleaned and ">" in cleaned


# --- check_full_response_format (regex version, analysis.py) ---------------------------------------------------

_ENVELOPE = re.compile(r"^<think>\s*((<step>.*?</step>\s*)+)</think>\s*<answer>.*?</answer>\s*$", re.DOTALL)
_STEP_BLOCK = re.compile(r"<step>(.*?)</step>", re.DOTALL)
_OPENING_TAG = re.compile(r"<(reasoning|search|context|conclusion)>")
_ANY_TAG = re.compile(r"</?[^>]+>")
_PAIR = {tag: re.compile(f"<{tag}>(.*?)</{tag}>", re.DOTALL) for tag in _STEP_TAGS}
_SEARCH_SEQUENCE = list(_STEP_TAGS)
_NON_SEARCH_SEQUENCE = list(_NON_SEARCH_TAGS)


def check_format_regex_reference(full_response: str) -> bool:
    """HiPRAG ``check_full_response_format``: exact tag sequences per step, anchored envelope."""
    idx = full_response.rfind("<think>")
    if idx == -1:
        return False
    match = _ENVELOPE.match(full_response[idx:].strip())
    if not match:
        return False
    steps = _STEP_BLOCK.findall(match.group(1))
    if not steps:
        return False
    for step in steps:
        sequence = _OPENING_TAG.findall(step)
        if sequence == _SEARCH_SEQUENCE:
            tags: tuple[str, ...] = _STEP_TAGS
        elif sequence == _NON_SEARCH_SEQUENCE:
            tags = _NON_SEARCH_TAGS
        else:
            return False
        if any(step.count(f"<{tag}>") != 1 or step.count(f"</{tag}>") != 1 for tag in tags):
            return False
        if tags is _STEP_TAGS:
            for tag in ("search", "context"):
                content = _PAIR[tag].search(step)
                if content is None or content.group(1).strip() == "":
                    return False
        cleaned = step
        for tag in tags:
            cleaned = _PAIR[tag].sub("", cleaned)
        if _ANY_TAG.search(cleaned):
            return False
    return True


# --- get_steps_from_full_response ------------------------------------------------------------------------------


def steps_reference(full_response: str) -> tuple[list[str], list[int]]:
    """HiPRAG ``get_steps_from_full_response``: (inner text of each step, offset of its ``<step>`` tag).

    Quirks kept: nothing is returned without both a last ``<think>`` and a ``</think>`` after it; the scan stops at
    the first ``<step>`` without a ``</step>``; a ``</step>`` may be matched beyond ``</think>``, and one ``<step>``
    found after ``</think>`` is still taken (the loop bound is only checked before each search).
    """
    contents: list[str] = []
    starts: list[int] = []
    think_start = full_response.rfind("<think>")
    # str.find with start -1 searches the last character only, as the released code does when there is no <think>.
    think_end = full_response.find("</think>", think_start)
    position = think_start
    while position < think_end:
        position = full_response.find("<step>", position)
        if position == -1:
            break
        close_at = full_response.find("</step>", position)
        if close_at == -1:
            break
        contents.append(full_response[position + 6 : close_at])
        starts.append(position)
        position = close_at + 7
    return contents, starts
