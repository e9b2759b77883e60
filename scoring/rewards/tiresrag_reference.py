"""TIRESRAG-R1's reward server as released: ``reward/answer_reflection_reward.py`` (probe2/TIRESRAG-R1 @ a457873).

Reproduces the released code bit for bit (checked against ``tiresrag_reward.jsonl``), including its failures, and
differs from the paper as REFERENCE.md §2.7 lists:

1. Reflection reward ∈ {−1, 0} (never +1): a wrong→right correction earns 0; "correct" is F1 > 0.5 or token CEM;
   first vs LAST answer; a correct answer whose F1 drops after reflection gets −1; a single wrong answer gets −1.
2. Answer F1/CEM use TIRESRAG's own normaliser (below), and a response without ``<answer>`` is scored as a whole.
3. a_t = 1 / (1 + math.exp((t − 0.9T)/10)) as written (overflows for t − 0.9T > ~7097).
4. W(ρ) with ρ the group mean of the *sufficiency labels*; the consistency penalty from z-scores with numpy's
   population std + 1e-8, the thinking/sufficiency numerators scaled by a_t·0.6 / a_t·0.3 (denominators not).
5. Judge values are used as returned (bools, strings, unclipped or NaN thinking scores).

The source ran numpy on float64 arrays; the few numpy reductions it used are emulated exactly in pure Python
(:func:`_np_sum`: numpy's pairwise summation; :func:`_np_std`: its two-pass population std), so these outputs are
compared exactly. Groups are formed purely by position (``reshape(-1, group_size)``).
"""

from __future__ import annotations

import copy
import math
import re
import string
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scoring.formats.tiresrag import (
    extract_all_answers_reference,
    extract_answer_math_reference,
    get_qa_reference,
    is_valid_sequence_reference,
    strip_sequence_reference,
)

# TIRESRAG's normalize_answer: punctuation (plus ' ´ `) becomes a space, not deleted as in SQuAD's; underscores too.
_PUNCT_TO_SPACE = str.maketrans(dict.fromkeys(string.punctuation + "''´`", " "))
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_YES_NO = ("yes", "no", "noanswer")
_TEXT_PUNCT = re.compile(r"[,.:\"'\[\]\-=\+\|!@#$%^&*();<>?/！￥…（）—\{\}：”“《》？]")
_TEXT_IMPORT = re.compile(r"import\s[a-zA-Z\.]+(\sas\s[a-zA-Z\.]+)\n")
_SPACES = re.compile(r"\s+")
_ANSWER_BLOCK = re.compile(r"<answer>.*?</answer>", re.DOTALL)
PAD_TOKEN = EOS_TOKEN = "<|endoftext|>"  # Qwen2.5-1.5B base, the reward server's --reward_pretrain


def normalize_answer_reference(s: str) -> str:
    """``normalize_answer``: ``_``→space, lower-case, punctuation and ``'´\\``` → space, drop articles, squash spaces."""
    text = s.replace("_", " ").lower().translate(_PUNCT_TO_SPACE)
    return " ".join(_ARTICLES.sub(" ", text).split())


def _bool_mapping(s: str) -> str:
    return "yes" if s == "True" else "no" if s == "False" else s


def exact_match_score_reference(prediction: str, ground_truth: str) -> bool:
    return normalize_answer_reference(_bool_mapping(prediction)) == normalize_answer_reference(
        _bool_mapping(ground_truth)
    )


def cover_exact_match_score_reference(prediction: str, ground_truth: str) -> int:
    """``cover_exact_match_score_1``: 1 when every gold token (``split(" ")``) is among the prediction's tokens."""
    pred_tokens = normalize_answer_reference(_bool_mapping(prediction)).split(" ")
    gold_tokens = normalize_answer_reference(_bool_mapping(ground_truth)).split(" ")
    return 1 if all(token in pred_tokens for token in gold_tokens) else 0


def f1_score_reference(prediction: str, ground_truth: str) -> tuple[float, float, float]:
    """``f1_score`` → ``(f1, precision, recall)``; the integer ``(0, 0, 0)`` when nothing overlaps or a yes/no/noanswer
    side differs from the other."""
    pred = normalize_answer_reference(_bool_mapping(prediction))
    gold = normalize_answer_reference(_bool_mapping(ground_truth))
    if (pred in _YES_NO or gold in _YES_NO) and pred != gold:
        return (0, 0, 0)
    pred_tokens, gold_tokens = pred.split(), gold.split()
    same = sum((Counter(pred_tokens) & Counter(gold_tokens)).values())
    if same == 0:
        return (0, 0, 0)
    precision = 1.0 * same / len(pred_tokens)
    recall = 1.0 * same / len(gold_tokens)
    return (2 * precision * recall) / (precision + recall), precision, recall


def normalize_text_reference(text: str) -> str:
    """``normalize_text``: the key a question is looked up by in the ``--data_path`` dataset."""
    text = _TEXT_PUNCT.sub(" ", text.lower())
    text = _TEXT_IMPORT.sub(" ", text)
    return _SPACES.sub(" ", text).strip()


def dynamic_weight_reference(global_step: float, total_training_steps: float) -> float:
    """The inline a_t of ``get_reward`` L396, character for character (``OverflowError`` past t − 0.9T ≈ 7097)."""
    return 1 / (1 + math.exp((global_step - total_training_steps * 0.9) / 10))


def difficulty_weight_reference(
    rho_q: float, *, A: float = 0.4, B: float = 1.5, rho0: float = 0.75, k: float = 10.0
) -> float:
    """``difficulty_weight``: ``A + (B - A) / (1.0 + np.exp(k * (rho_q - rho0)))`` (TIRESRAG-R1 Eq. 4, W(ρ)).

    The source's ``np.exp`` on a float64 overflows to ``inf`` (with a RuntimeWarning) past an exponent of ~709.78,
    so W → A (0.4) for a large ρ, e.g. a judge's raw sufficiency of 100 (the released parser passes it through);
    ``math.exp`` raises ``OverflowError`` there instead, so the overflow is mapped to ``inf`` as numpy does.
    """
    exponent = k * (rho_q - rho0)
    try:
        growth = math.exp(exponent)
    except OverflowError:  # numpy: exp(x) = inf for x > log(DBL_MAX)
        growth = math.inf
    return A + (B - A) / (1.0 + growth)


@dataclass(frozen=True, slots=True)
class ReflectionOutcome:
    """The reflection branch of ``get_reward`` (L306-358) for one response, with its logged flags."""

    reward: int  # reflect_results: 0 or -1
    no_reflection: int  # 没有反思的: exactly one answer
    unchanged_reflection: int  # 没有改变的reflect
    right_to_wrong: int  # 反思前正确的，后面错误的
    wrong_to_right: int  # 反思前错误的，后面正确的


def reflection_reference(answers: Sequence[str], gold: str) -> ReflectionOutcome:
    """Reflection reward and flags from the FIRST and LAST of ``answers`` (REFERENCE.md §2.2)."""
    f1s = [f1_score_reference(answer, gold)[0] for answer in answers]
    cems = [cover_exact_match_score_reference(answer, gold) for answer in answers]
    if len(answers) > 1:
        first_right = f1s[0] > 0.5 or cems[0] == 1
        last_right = f1s[-1] > 0.5 or cems[-1] == 1
        if first_right and last_right and f1s[-1] >= f1s[0]:
            return ReflectionOutcome(0, 0, 1, 0, 0)
        if first_right:  # last wrong, or still right with a lower F1
            return ReflectionOutcome(-1, 0, 0, 1, 0)
        if last_right:
            return ReflectionOutcome(0, 0, 0, 0, 1)
        return ReflectionOutcome(-1, 0, 1, 0, 0)
    if len(answers) == 1:
        return ReflectionOutcome(0 if f1s[0] > 0.5 or cems[0] == 1 else -1, 1, 0, 0, 0)
    return ReflectionOutcome(0, 0, 0, 0, 0)


# --- numpy emulation -------------------------------------------------------------------------------------------


def _np_rows(values: Sequence[Any], group_size: int) -> list[list[Any]]:
    """``np.array(values).reshape(-1, group_size)`` for a flat list."""
    n = len(values)
    if group_size <= 0 or n % group_size:
        # Reproduces numpy's reshape failure (the source never checks divisibility).
        raise ValueError(f"cannot reshape array of size {n} into shape ({group_size})")
    return [list(values[i : i + group_size]) for i in range(0, n, group_size)]


def _np_float(value: Any) -> float:
    """An element of a numeric numpy array; a string or None made the source's array a str/object array whose
    reductions raise ``TypeError`` (reproduced on purpose, message from numpy's str-array case)."""
    if isinstance(value, bool | int | float):
        return float(value)
    raise TypeError(
        f"the resolved dtypes are not compatible with add.reduce (non-numeric judge value {value!r} in the array)"
    )


def _pairwise_sum(a: Sequence[float]) -> float:
    """numpy's ``pairwise_sum`` (loops_utils.h): blocks of 8 partial sums, halving above 128 elements."""
    n = len(a)
    if n < 8:
        res = -0.0
        for x in a:
            res += x
        return res
    if n <= 128:
        r = list(a[:8])
        i = 8
        while i < n - n % 8:
            for j in range(8):
                r[j] += a[i + j]
            i += 8
        res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
        for x in a[i:]:
            res += x
        return res
    half = n // 2
    half -= half % 8
    return _pairwise_sum(a[:half]) + _pairwise_sum(a[half:])


def _np_sum(row: Sequence[float]) -> float:
    """``np.add.reduce`` over one contiguous row: the identity 0.0 plus the pairwise sum of the row."""
    return 0.0 + _pairwise_sum(row)


def _np_mean(row: Sequence[float]) -> float:
    return _np_sum(row) / len(row)


def _np_std(row: Sequence[float]) -> float:
    """``np.std`` (ddof=0): two passes, ``sqrt(sum((x - mean)**2) / n)``."""
    mean = _np_mean(row)
    return math.sqrt(_np_sum([(x - mean) * (x - mean) for x in row]) / len(row))


def _np_min(row: Sequence[float]) -> float:
    """``np.min``: NaN propagates (Python's ``min`` would not)."""
    return math.nan if any(math.isnan(x) for x in row) else min(row)


def consistency_penalty_reference(
    answer_reward: Sequence[Any],
    thinking_reward: Sequence[Any],
    sufficient_reward: Sequence[Any],
    global_step: float,
    total_training_steps: float,
    lambda_penalty: float = 0.1,
    group_size: int = 1,
) -> list[list[float]]:
    """``compute_consistency_penalty`` (L31-63) → per-group rows of ``−λ·δa·δt·δs`` where the product is < 0, else
    (−)0.0, so every value is ≥ 0 (the trainer subtracts it). Each δ divides by the raw reward's population std + 1e-8.
    """
    w = 1 / (1 + math.exp((global_step - total_training_steps * 0.9) / 10))
    rows_a = _np_rows(answer_reward, group_size)
    rows_t = _np_rows(thinking_reward, group_size)
    rows_s = _np_rows(sufficient_reward, group_size)
    penalty: list[list[float]] = []
    for raw_a, raw_t, raw_s in zip(rows_a, rows_t, rows_s, strict=True):
        a, t, s = ([_np_float(v) for v in row] for row in (raw_a, raw_t, raw_s))
        std_a, std_t, std_s = _np_std(a) + 1e-8, _np_std(t) + 1e-8, _np_std(s) + 1e-8
        mean_a = _np_mean(a)
        wt = [w * 0.6 * x for x in t]
        ws = [w * 0.3 * x for x in s]
        mean_wt, mean_ws = _np_mean(wt), _np_mean(ws)
        row: list[float] = []
        for x_a, x_t, x_s in zip(a, wt, ws, strict=True):
            product = (x_a - mean_a) / std_a * ((x_t - mean_wt) / std_t) * ((x_s - mean_ws) / std_s)
            row.append(-lambda_penalty * product * (1.0 if product < 0 else 0.0))
        penalty.append(row)
    return penalty


# --- the server's get_reward ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JudgeServerReply:
    """What the reward server got back from the judge server (``sufficient_thinking_reward.py`` /generate)."""

    status_code: int
    results: list[Any] = field(default_factory=list)  # sufficiency values as get_result returned them
    thinking_results: list[Any] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class RewardServerResult:
    rewards: dict[str, list[Any]]  # the dict get_reward returns, keys as in the source
    sufficiency_request_payload: dict[str, list[dict[str, Any]]]  # the JSON POSTed to the judge server


class MathRuleProxyReference:
    """``MathRuleProxy`` (the FastAPI reward server on port 1278) with its dataset, tokenizer tokens and template."""

    def __init__(
        self,
        dataset: Sequence[Mapping[str, Any]],
        *,
        template_type: str = "qwen_chat",
        pad_token: str = PAD_TOKEN,
        eos_token: str = EOS_TOKEN,
    ) -> None:
        # get_answer_dict: later rows with the same normalised question win, as dict assignment does.
        self.answers_by_question = {
            normalize_text_reference(row["question"]): row["answer"] for row in dataset
        }
        self.template_type = template_type
        self.pad_token = pad_token
        self.eos_token = eos_token

    def _extract(self, queries: Sequence[str]) -> list[tuple[dict[str, Any], str]]:
        """Per query, in order: the judge-server item ``{question, answer, context}`` and the solution text."""
        rows = []
        for query in queries:
            query = strip_sequence_reference(query, self.pad_token, self.eos_token) + self.eos_token
            question, solution = get_qa_reference(query, self.template_type)
            # An unknown question raises KeyError, as the source's dict lookup does.
            gold = self.answers_by_question[normalize_text_reference(question)]
            # The judge sees the solution with every <answer> block removed (think/search/information kept).
            rows.append(
                ({"question": question, "answer": gold, "context": _ANSWER_BLOCK.sub("", solution)}, solution)
            )
        return rows

    def get_reward(
        self,
        queries: Sequence[str],
        group_size: int,
        exit_flags: Sequence[Any] | None,
        total_training_steps: float,
        global_step: float,
        judge_reply: JudgeServerReply,
    ) -> RewardServerResult:
        """``MathRuleProxy.get_reward`` end to end, with the judge server's reply given (REFERENCE.md §2.1–2.4).

        Unlike the source, ``queries`` is not modified in place.
        """
        extracted = self._extract(queries)
        payload = {"data": [item for item, _ in extracted]}
        solutions = [solution for _, solution in extracted]
        answers = [item["answer"] for item, _ in extracted]
        preds = [extract_answer_math_reference(s) for s in solutions]
        all_preds = [extract_all_answers_reference(s) for s in solutions]
        n = len(queries)

        scores = [float(f1_score_reference(preds[t], answers[t])[0]) for t in range(n)]
        premilinary_scores = copy.copy(scores)
        cover_scores = [cover_exact_match_score_reference(preds[t], answers[t]) for t in range(n)]
        reflections = [reflection_reference(all_preds[i], answers[i]) for i in range(n)]
        format_score = [0.2 if is_valid_sequence_reference(s)[0] else 0 for s in solutions]
        correct_index = [i for i in range(n) if cover_scores[i] == 1]
        wrong_index = [i for i in range(n) if cover_scores[i] == 0]

        if judge_reply.status_code != 200:
            # Reproduces the source: `sufficient_res` is only bound inside `if response.status_code == 200`.
            raise UnboundLocalError(
                "cannot access local variable 'sufficient_res' where it is not associated with a value"
            )
        sufficient_res = judge_reply.results
        thinking_res = judge_reply.thinking_results

        sufficient_groups = _np_rows(sufficient_res, group_size)
        score_groups = _np_rows(premilinary_scores, group_size)
        premilinary_match: list[float] = []
        for i, (suff_row, score_row) in enumerate(zip(sufficient_groups, score_groups, strict=True)):
            for j in range(group_size):
                index = i * group_size + j
                if suff_row[j] == 1:
                    hit = score_row[j] > 0.6 or index in correct_index
                else:
                    hit = score_row[j] < 0.6 and index in wrong_index
                premilinary_match.append(1.0 if hit else 0.0)
        ratios = [_np_sum([_np_float(v) for v in row]) / group_size for row in sufficient_groups]
        difficulty = [difficulty_weight_reference(r) for r in ratios for _ in range(group_size)]
        penalty = consistency_penalty_reference(
            scores, thinking_res, sufficient_res, global_step, total_training_steps, group_size=group_size
        )
        for index in range(n):
            scores[index] += dynamic_weight_reference(global_step, total_training_steps) * (
                0.6 * thinking_res[index] + 0.3 * sufficient_res[index] + 0.3 * reflections[index].reward
            )

        flags = [exit_flags] if exit_flags is None else list(exit_flags)  # np.array(None) has size 1
        exit_lose_reward: list[int] = []
        total_groups = _np_rows(scores, group_size)
        for i, flag_row in enumerate(_np_rows(flags, group_size)):
            lowest = _np_min(total_groups[i])
            for j in range(group_size):
                exit_lose_reward.append(1 if flag_row[j] == 1 and total_groups[i][j] <= lowest else 0)

        zeros = [0] * n  # the four 前面… counters are created and never updated
        rewards: dict[str, list[Any]] = {
            "总的分数": scores,
            "纯answer分数": premilinary_scores,
            "纯format分数": format_score,
            "前面对了后面错了有足够信息": list(zeros),
            "前面错了后面对了有足够信息": list(zeros),
            "前面对了后面错了没有足够信息": list(zeros),
            "前面错了后面对了没有足够信息": list(zeros),
            "没有反思的": [r.no_reflection for r in reflections],
            "没有改变的reflect": [r.unchanged_reflection for r in reflections],
            "反思前错误的，后面正确的": [r.wrong_to_right for r in reflections],
            "反思前正确的，后面错误的": [r.right_to_wrong for r in reflections],
            "exit_lose_reward": exit_lose_reward,
            "sufficient_premilinary_match": premilinary_match,
            "thinking_reward": thinking_res,
            "difficulty": difficulty,
            "penalty": [p for row in penalty for p in row],
        }
        return RewardServerResult(rewards, payload)
