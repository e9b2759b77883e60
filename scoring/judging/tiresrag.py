"""TIRESRAG-R1's two LLM judges: sufficiency (Eq. 2, Fig. 11) and thinking quality (Eq. 3, Fig. 12).

Both run on the judge server ``reward/sufficient_thinking_reward.py`` (Qwen3-8B under vLLM, T=0.6, top_p=0.95,
top_k=20, max_tokens=4048). The prompt strings below are the released runtime values (``prompts/tiresrag_*``); they
are used in paper mode too. Against the paper's figures (PDF text, so line breaks are lost):

* Fig. 11 (sufficiency) is the same text, except the PDF prints "### OUESTION" (an extraction error for QUESTION),
  straight apostrophes in "Roald Dahl's" where the code has ’, and cuts the example JSON after
  ``{{"Sufficient Context To The Given Answer":``. Both keep the literal double braces: the system prompt is never
  ``.format``-ed, so the judge sees ``{{…}}``. The reminder paragraph calls the criterion "Sufficient Context".
* Fig. 12 (thinking) is the same text with "-" for the code's "–" and the "1."/"2." list numbers partly lost;
  ``{{0.0, 0.1, 0.2, ..., 1.0}}`` keeps its double braces in both.
* The user messages (QUESTION / gold ANSWER / REFERENCES; CONTEXT / QUESTION / MODEL THINKING PROCESS) appear in no
  figure; they are the code's templates, indentation included.
* Fig. 13 is an evaluation-time answer judge (GPT-4o, "True"/"False"); the released code has no such prompt (its
  FlashRAG ``LLMJudge`` prompt is a different 0–10 rating and is not enabled). It is transcribed here from the paper.

What the judges see (the paper's RD, and the code's ``context``): the response with every ``<answer>`` block removed
— reasoning, queries, retrieved documents and reflection kept. The thinking judge gets the ``<information>``
contents as CONTEXT and everything else as the thinking process.

Paper-mode parsing never turns a bad reply into 0: the sufficiency reply's LAST ``{"Sufficient Context To The Given
Answer": 0|1}`` object (after removing any ``<think>…</think>`` block of the judge model) gives ``Verdict.TRUE`` /
``FALSE``, anything else ``Verdict.UNPARSEABLE``; the thinking reply must be a single number in [0, 1] ("A single
float-type score … No explanation. Only the score."), anything else is ``Verdict.UNPARSEABLE``. The reference
parsers keep the released behaviour: the FIRST matching JSON object's raw value (int, bool, string…), 0 without
one (counted as a miss), ``json.JSONDecodeError`` on an invalid value; ``float()`` of the thinking reply, any
exception ⇒ 0, no clipping (1.5, −0.5, NaN pass through).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scoring.trajectory import Trajectory
from scoring.verdicts import Verdict

# scripts/sufficient_thinking_reward.sh; the paper only says "a locally deployed LLM".
PAPER_JUDGE_MODEL = "Qwen3-8B"
PAPER_ANSWER_JUDGE_MODEL = "gpt-4o"  # Fig. 13 caption, evaluation only
SAMPLING_PARAMS: Mapping[str, Any] = {
    "temperature": 0.6,
    "top_p": 0.95,
    "max_tokens": 4048,
    "top_k": 20,
    "stop": ["<|im_end|>", "</s>", "<|assistant|>"],
}

SUFFICIENCY_SYSTEM_PROMPT = """
You are an expert LLM evaluator that excels at evaluating a QUESTION, ANSWER and REFERENCES.
Consider the following criteria:
Sufficient Context To The Given Answer: 1 IF the CONTEXT is sufficient to infer the ANSWER to the question and 0
IF the CONTEXT cannot be used to infer the ANSWER to the question. Make the sufficiency judgment based solely on the context, without relying on your memory to determine whether the question can be answered from the context.
First, output a list of step-by-step questions that would be used to arrive at a label for the criteria. Make sure to include questions about assumptions implicit in the QUESTION. Include questions about any mathematical calculations or arithmetic that would be required.
Next, answer each of the questions. Please note that you may answer these questions only on the basis of the given context; do not use your own outside knowledge. Make sure to work step by step through any required mathematical calculations or arithmetic.
Finally, use these answers to evaluate the criteria.
EVALUATION (JSON)
EXAMPLE:
### QUESTION
In which year did the publisher of Roald Dahl’s Guide to Railway Safety cease to exist?
### ANSWER
2001
### References
Roald Dahl’s Guide to Railway Safety was published in 1991 by the British Railways Board.
The British Railways Board had asked Roald Dahl to write the text of the booklet, and
Quentin Blake to illustrate it, to help young people enjoy using the railways safely. The
British Railways Board (BRB) was a nationalised industry in the United Kingdom that
operated from 1963 to 2001. Until 1997 it was responsible for most railway services in Great
Britain, trading under the brand name British Railways and, from 1965, British Rail. It
did not operate railways in Northern Ireland, where railways were the responsibility of the
Government of Northern Ireland.
### EXPLANATION
The context mentions that Roald Dahl’s Guide to Railway Safety was published by the
British Railways Board. It also states that the British Railways Board operated from 1963 to
2001, meaning the year it ceased to exist was 2001. Therefore, the context does provide a
precise answer to the question.
### JSON
{{"Sufficient Context To The Given Answer": 1}}
Remember the instructions: You are an expert LLM evaluator that excels at evaluating a
QUESTION, ANSWER and REFERENCES. Consider the following criteria:
Sufficient Context: 1 IF the CONTEXT is sufficient to infer the ANSWER to the question and 0
IF the CONTEXT cannot be used to infer the ANSWER to the question. Make the sufficiency judgment based solely on the context, without relying on your memory to determine whether the question can be answered from the context.
First, output a list of step-by-step questions that would be used to arrive at a label for the criteria. Make sure to include questions about assumptions implicit in the QUESTION. Include questions about any mathematical calculations or arithmetic that would be required.
Next, answer each of the questions. Please note that you may answer these questions only on the basis of the given context; do not use your own outside knowledge. Make sure to work step by step through any required mathematical calculations or arithmetic.
Finally, use these answers to evaluate the criteria.
Output the ### EXPLANATION (Text). Then, use the EXPLANATION to output the ###
EVALUATION (JSON)
"""

SUFFICIENCY_USER_TEMPLATE = "\n        ### QUESTION\n        {question}\n        ### ANSWER\n        {answer}    \n        ### REFERENCES\n        {context}"

THINKING_SYSTEM_PROMPT = """
You are an expert reasoning evaluator for Retrieval-Augmented Generation (RAG) tasks.
Your goal is to judge the reasoning quality of the model's thinking process based on the retrieved context and question.
You will assign a reward score between 0 and 1. This score reflects only the quality of the reasoning process, not whether the final answer is correct.

Evaluation Criteria:
1. Logical Soundness – Is the reasoning coherent and structured?
2. Contextual Alignment – Does it use retrieved evidence correctly?
3. Error Awareness – Does it avoid unsupported assumptions?
4. Clarity and Precision – Is it concise, relevant, and non-redundant?

Scoring:
0.0: Completely flawed reasoning
1.0: Perfect reasoning
Intermediate (e.g., 0.3, 0.7) are allowed.

Important:
- Judge only the thinking process, not the answer.
- Reward accurate, grounded, and structured reasoning.

Your Output:
A single float-type score from {{0.0, 0.1, 0.2, ..., 1.0}}.
No explanation. Only the score.
"""

THINKING_USER_TEMPLATE = "\n        INPUT:\n        ### CONTEXT\n        {information}\n        ### QUESTION\n        {question}\n        ### MODEL THINKING PROCESS\n        {thinking_process}    \n        "

# Fig. 13, transcribed from the paper (no released counterpart; PDF line breaks unknown, so one line per field).
ANSWER_JUDGE_PROMPT_PAPER = (
    "Given a Question and its Golden Answer, verify whether the Predicted Answer is correct. The prediction is "
    "correct if it fully aligns with the meaning and key information of the Golden Answer. Respond with True if the "
    "prediction is correct and False otherwise.\n"
    "Question: {question}\n"
    "Golden Answer: {reference}\n"
    "Predicted Answer: {prediction}"
)

Message = dict[str, str]

_JUDGE_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)
_ANSWER_BLOCK = re.compile(r"<answer>.*?</answer>", re.DOTALL)
_INFORMATION_BLOCK = re.compile(r"<information>.*?</information>", re.DOTALL)
# The prompt's example key, or the reminder's shorter name for the same criterion; optional quotes on the value.
_SUFFICIENCY_JSON = re.compile(
    r'\{\s*"sufficient context(?: to the given answer)?"\s*:\s*("?)\s*([^\s,}"]*)\s*\1\s*[,}]', re.IGNORECASE
)
_SUFFICIENT = {"1": Verdict.TRUE, "1.0": Verdict.TRUE, "true": Verdict.TRUE}
_INSUFFICIENT = {"0": Verdict.FALSE, "0.0": Verdict.FALSE, "false": Verdict.FALSE}
_SCORE = re.compile(r"\+?(?:\d+(?:\.\d*)?|\.\d+)")
_ANSWER_JUDGEMENTS = {"true": Verdict.TRUE, "yes": Verdict.TRUE, "false": Verdict.FALSE, "no": Verdict.FALSE}


# --- paper mode -------------------------------------------------------------------------------------------------


def reasoning_trajectory(trajectory: Trajectory) -> str:
    """RD (§3, Eq. 2): the reasoning steps and retrieved documents, i.e. every turn with its answer removed."""
    return "".join(_ANSWER_BLOCK.sub("", step.raw) for step in trajectory.steps)


def split_information(reasoning: str) -> tuple[str, str]:
    """``(retrieved documents, thinking process)`` of an RD text: the ``<information>`` contents joined by newlines,
    and the text around them, each piece stripped and joined by newlines."""
    information = "\n".join(
        step.strip() for step in re.findall(r"<information>(.*?)</information>", reasoning, re.S)
    )
    thinking = "\n".join(part.strip() for part in _INFORMATION_BLOCK.split(reasoning) if part.strip())
    return information, thinking


def sufficiency_messages(question: str, gold_answer: str, context: str) -> list[Message]:
    """The chat messages of the sufficiency judge (Fig. 11): system prompt, then QUESTION / gold ANSWER / RD."""
    user = SUFFICIENCY_USER_TEMPLATE.format(question=question, answer=gold_answer, context=context)
    return [{"role": "system", "content": SUFFICIENCY_SYSTEM_PROMPT}, {"role": "user", "content": user}]


def thinking_messages(question: str, information: str, thinking_process: str) -> list[Message]:
    """The chat messages of the thinking judge (Fig. 12)."""
    user = THINKING_USER_TEMPLATE.format(
        question=question, information=information, thinking_process=thinking_process
    )
    return [{"role": "system", "content": THINKING_SYSTEM_PROMPT}, {"role": "user", "content": user}]


def answer_judge_prompt(question: str, reference: str, prediction: str) -> str:
    """Fig. 13's evaluation prompt (paper only)."""
    return ANSWER_JUDGE_PROMPT_PAPER.format(question=question, reference=reference, prediction=prediction)


def parse_sufficiency_verdict(reply: str) -> Verdict:
    """The sufficiency judge's label: the last JSON label after the judge's own ``<think>`` block is removed.

    >>> parse_sufficiency_verdict('### EXPLANATION ... ### JSON {"Sufficient Context To The Given Answer": 1}')
    <Verdict.TRUE: 'true'>
    >>> parse_sufficiency_verdict("The context is sufficient.")
    <Verdict.UNPARSEABLE: 'unparseable'>
    """
    matches = _SUFFICIENCY_JSON.findall(_JUDGE_THINK.sub("", reply))
    if not matches:
        return Verdict.UNPARSEABLE
    value = matches[-1][1].lower()
    return _SUFFICIENT.get(value) or _INSUFFICIENT.get(value) or Verdict.UNPARSEABLE


def parse_thinking_score(reply: str) -> float | Verdict:
    """The thinking judge's score in [0, 1], or ``Verdict.UNPARSEABLE`` (never a silent 0, never clipped).

    >>> parse_thinking_score("<think>fine</think>\\n0.7"), parse_thinking_score("1.5")
    (0.7, <Verdict.UNPARSEABLE: 'unparseable'>)
    """
    text = _JUDGE_THINK.sub("", reply).strip()
    if not _SCORE.fullmatch(text):
        return Verdict.UNPARSEABLE
    score = float(text)
    return score if 0.0 <= score <= 1.0 else Verdict.UNPARSEABLE


def parse_answer_judgement(reply: str) -> Verdict:
    """Fig. 13's reply: "True"/"False" as the prompt asks (or "yes"/"no", as the caption describes it).

    >>> parse_answer_judgement("True"), parse_answer_judgement("Not True")
    (<Verdict.TRUE: 'true'>, <Verdict.UNPARSEABLE: 'unparseable'>)
    """
    return _ANSWER_JUDGEMENTS.get(reply.strip().rstrip(".").lower(), Verdict.UNPARSEABLE)


# --- reference variants (reward/sufficient_thinking_reward.py) --------------------------------------------------

_REF_SUFFICIENCY_JSON = re.compile(
    r'(\{\s*"sufficient context to the given answer"\s*:\s*[^}]+\})', re.DOTALL
)
_REF_SPACES = re.compile(r"\s+")
_REF_INFO = re.compile(r"<information>(.*?)</information>", re.DOTALL)
_REF_OTHER = re.compile(r"(?:</information>)(.*?)(?=<information>|$)", re.DOTALL)
_REF_START = re.compile(r"^(.*?)(?=<information>|$)", re.DOTALL)
_REF_QUESTION = re.compile(r"<\|im_start\|>user\n(.*?)<\|im_end\|>", re.DOTALL)
_SUFFICIENCY_KEY = "sufficient context to the given answer"


@dataclass(slots=True)
class ParseMissCounter:
    """The judge server's global ``m``: replies without the JSON label, reset to 0 at every /generate request."""

    misses: int = 0


def get_result_reference(s: str, counter: ParseMissCounter) -> Any:
    """``get_result``: the raw value of the FIRST ``{"sufficient context to the given answer": …}`` in the lower-cased
    reply (the judge's ``<think>`` included); 0 and a counted miss without one. An invalid JSON value (``yes``)
    raises ``json.JSONDecodeError`` as the source's ``json.loads`` does (the server then answers HTTP 500)."""
    match = _REF_SUFFICIENCY_JSON.search(s.lower())
    if not match:
        counter.misses += 1
        return 0
    return json.loads(_REF_SPACES.sub(" ", match.group(1)))[_SUFFICIENCY_KEY]


def remove_think_tags_reference(text: str) -> str:
    return _JUDGE_THINK.sub("", text)


def extract_information_and_others_reference(text: str) -> tuple[str, str]:
    """``extract_information_and_others`` → ``(information, thinking_process)``, quirks kept: text after a stray
    ``</information>`` counts as thinking, and the text before the first ``<information>`` only when non-blank."""
    info = [c.strip() for c in _REF_INFO.findall(text)]
    others = _REF_OTHER.findall(text)
    start = _REF_START.findall(text)
    if start and start[0].strip():
        others = [start[0], *others]
    return "\n".join(info), "\n".join(c.strip() for c in others if c.strip())


def extract_question_reference(question: str) -> str:
    """``extract_question``: the user turn of a qwen_chat prompt."""
    match = _REF_QUESTION.search(question)
    if match is None:
        # Reproduces the source: `content` is only bound when the regex matched.
        raise UnboundLocalError(
            "cannot access local variable 'content' where it is not associated with a value"
        )
    return match.group(1)


def thinking_score_reference(text: str) -> float:
    """``float(remove_think_tags(text.strip()).strip())``, any failure ⇒ 0 (int); NaN, inf and out-of-range pass."""
    try:
        return float(remove_think_tags_reference(text.strip()).strip())
    except ValueError:  # the source's bare `except:`; float() of a str raises nothing else
        return 0


@dataclass(frozen=True, slots=True)
class JudgeServerResponse:
    results: list[Any]  # sufficiency values, as get_result returned them
    thinking_results: list[float]
    parse_misses: int  # the global m after the request
    sufficiency_prompts: list[list[Message]] = field(default_factory=list)
    thinking_prompts: list[list[Message]] = field(default_factory=list)


def generate_reference(
    data: Sequence[Mapping[str, Any]], suff_llm_outputs: Sequence[str], think_llm_outputs: Sequence[str]
) -> JudgeServerResponse:
    """The /generate handler with the vLLM completions given: build both prompts per item (as chat messages; the
    server then applied the judge tokenizer's chat template), parse the sufficiency completions, then the thinking
    ones. A malformed sufficiency JSON raises (HTTP 500 in the server)."""
    counter = ParseMissCounter()  # `global m; m = 0` at the start of every request
    sufficiency_prompts = [
        sufficiency_messages(item["question"], item["answer"], item["context"]) for item in data
    ]
    thinking_prompts = []
    for item in data:
        information, thinking_process = extract_information_and_others_reference(item["context"])
        thinking_prompts.append(thinking_messages(item["question"], information, thinking_process))
    results = [get_result_reference(text, counter) for text in suff_llm_outputs]
    thinking_results = [thinking_score_reference(text) for text in think_llm_outputs]
    return JudgeServerResponse(
        results, thinking_results, counter.misses, sufficiency_prompts, thinking_prompts
    )
