"""AutoSearch's self-answering: the intermediate-answer prompt, and reading the answer out of the policy's reply.

AutoSearch has no external judge: at each retrieval step the *policy itself* answers the question from the
trajectory so far (paper Eqs. 4–5), and that intermediate answer decides the minimal sufficient depth t_c (Eq. 6)
and the search quality reward (Eqs. 8–9). This module holds the two prompt versions and the reply parsing; the
generation itself happens in agent/, and the answers come back to ``scoring.rewards.autosearch`` as inputs.

* :data:`INTERMEDIATE_ANSWER_PROMPT` — the paper's Prompt 1 (user content; the caller applies the chat template).
* :func:`intermediate_answer_prompt_reference` — the released code's hard-coded Qwen chat string
  (``main_ppo_format_turn_new78.RewardManager.__call__``, REFERENCE.md §b AutoSearch), byte for byte. It differs
  from Prompt 1 in wording ("informations", ``1)``/``2)`` instead of ``(1)``/``(2)``, no spaces inside the example
  tags), in layout (a ``"\\n\\n"`` after the question, the trajectory followed by ``"\\n\\n."``), and it carries its
  own system turn ("You are a helpful assistant.").
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from scoring.formats.autosearch import extract_original_question_reference

# Paper Prompt 1 (Intermediate Answer Prompt), transcribed from the figure: line breaks as the figure sets them,
# {question} and {trajectory} standing for the bold placeholders.
INTERMEDIATE_ANSWER_PROMPT = (
    "Answer the given question according to search trajectories, which consists of multiple reasoning, search "
    "calls, and retrieved information. Important instructions:\n"
    "(1) You must conduct reasoning inside <think> and </think> first.\n"
    "(2) After reasoning, output the final answer wrapped in <answer> and </answer>.\n"
    "For example: <think> Reasoning </think>\n"
    "<answer> Jaden Smith </answer>.\n"
    "Search trajectory: Question: {question}. Below are your previous reasoning, search calls, and retrieved "
    "information: {trajectory}."
)

_REFERENCE_PROMPT_HEAD = (
    "<|im_start|>system\n"
    "You are a helpful assistant."
    "<|im_end|>\n"
    "<|im_start|>user\n"
    "Answer the given question according to search trajectories, which consists of multiple reasoning, search "
    "calls, and retrieved informations.\n"
    "Important instructions:\n"
    "1) You must conduct reasoning inside <think> and </think> first.\n"
    "2) After reasoning, output the final answer wrapped in <answer> and </answer>.\n"
    "For example: <think>Reasoning</think><answer>Jaden Smith</answer>\n"
    "Search trajectory: "
)
_REFERENCE_PROMPT_TAIL = ".<|im_end|>\n<|im_start|>assistant\n"

_FIRST_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


def intermediate_answer_prompt(question: str, trajectory_text: str) -> str:
    """Paper Prompt 1 filled in: ``x_{i,t}`` (Eq. 4) is the question and the trajectory text up to step t.

    ``trajectory_text`` is the response so far (reasoning, search calls and retrieved information), e.g.
    :func:`scoring.formats.autosearch.trajectory_prefix`. Both are inserted verbatim.
    """
    return INTERMEDIATE_ANSWER_PROMPT.format(question=question, trajectory=trajectory_text)


def intermediate_answer_prompt_reference(question: str, cumulative_text: str) -> str:
    """The released code's self-answering prompt (a complete Qwen chat string, generated without a template).

    ``cumulative_text`` is every turn's response and observation so far, concatenated as decoded.
    """
    context = (
        "Question: "
        + question
        + "\n\n"
        + "Below are your previous reasoning, search calls, and retrieved informations:\n"
        + cumulative_text
        + "\n\n"
    )
    return _REFERENCE_PROMPT_HEAD + context + _REFERENCE_PROMPT_TAIL


def intermediate_prompts_reference(prompt_text: str, turns: Sequence[tuple[str, str]]) -> list[str]:
    """Every self-answering prompt the released RewardManager builds for one sample, in order.

    ``turns`` holds each turn's ``(response, observation)`` as decoded; a prompt is built after every turn whose
    observation is non-empty (retrieved documents *or* the invalid-action notice), over all text so far. The
    question comes from :func:`~scoring.formats.autosearch.extract_original_question_reference` (which raises
    ``AttributeError`` when the prompt has no ``Question:``, as the released code does).
    """
    question = extract_original_question_reference(prompt_text)
    prompts: list[str] = []
    cumulative: list[str] = []
    for response, observation in turns:
        cumulative.append(response)
        if observation:
            cumulative.append(observation)
            prompts.append(intermediate_answer_prompt_reference(question, "".join(cumulative)))
    return prompts


def extract_intermediate_answer(reply: str) -> str:
    """The intermediate answer in a self-answering reply: the *first* ``<answer>…</answer>`` stripped, else the
    whole reply stripped (special tokens such as ``<|im_end|>`` are kept). Both the paper mode and the released
    code (``RewardManager._extract_final_answer``) read replies this way.

    >>> extract_intermediate_answer("<think>x</think><answer> Paris </answer><answer>Lyon</answer>")
    'Paris'
    >>> extract_intermediate_answer("  Paris<|im_end|> ")
    'Paris<|im_end|>'
    """
    match = _FIRST_ANSWER.search(reply)
    return match.group(1).strip() if match else reply.strip()
