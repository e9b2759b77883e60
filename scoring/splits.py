"""One distribution for training and evaluation: a seeded split of one source's questions by a hash of their ids.

Experiment #2 trained on multi-hop questions (the ``train`` split of wiki_multihop) and measured on NQ's single-hop
``test`` split, so what a policy learnt on one was measured on another. :func:`split_questions` splits ONE source
(NQ by default) into a **held-out set** and a **training pool**:

* the held-out set holds the *anchors* (the ids of an earlier evaluation, e.g. the H100 run's 200 held-out
  questions, so its numbers stay comparable) and then the questions of lowest hash until it holds
  ``held_out_size`` questions; every held-out question stays in it, guessable or not (the evaluation measures what
  the source asks);
* the training pool is the rest, without the questions an outcome reward pays for without evidence: guessable ones
  (:func:`scoring.guessable.guessable`: yes/no, or the answer named among the question's options) and **echoes**
  (:func:`echo`: some gold answer is inside the question itself, so repeating the question earns CEM).

The hash is SHA-256 of ``salt``, a NUL byte and the id, read as a fraction in [0, 1): the split depends on the ids
and the salt only, never on the file's order, and the same salt gives the same split on every machine and Python
version. Pure standard library.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scoring.guessable import guessable
from scoring.metrics import as_golds, cover_exact_match

ECHO = "echo"
"""Why a question is left out of training: some gold answer appears (normalised) inside the question."""

DEFAULT_SALT = "searchlab-experiment-3"
DEFAULT_SOURCE = "nq"
DEFAULT_HELD_OUT_SIZE = 1000


def hash_unit(salt: str, question_id: str) -> float:
    """The id's place in [0, 1): the first 8 bytes of SHA-256(``salt`` NUL ``question_id``) over 2**64.

    >>> hash_unit("s", "nq_litm0") == hash_unit("s", "nq_litm0")
    True
    >>> 0.0 <= hash_unit("s", "nq_litm0") < 1.0
    True
    """
    digest = hashlib.sha256(f"{salt}\x00{question_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def echo(question: str, golds: str | Iterable[str]) -> bool:
    """Some gold answer is inside the question after normalisation: HiPRAG's CEM (substring match after
    ``normalize_string``, ``scoring.metrics.cover_exact_match``) credits an answer that merely repeats the question.

    >>> echo("who sang the song photograph by ringo starr", ["Ringo Starr"])
    True
    >>> echo("who got the first nobel prize in physics", ["Wilhelm Conrad Röntgen"])
    False
    """
    return cover_exact_match(question, as_golds(golds))


def training_exclusion(question: str, golds: str | Iterable[str]) -> str | None:
    """Why a question stays out of training (``"yes/no"``, ``"named option"``, :data:`ECHO`), or None.

    Guessable first: every guessable NQ question is an echo too, and the narrower reason is the more telling."""
    golds = as_golds(golds)
    return guessable(question, golds) or (ECHO if echo(question, golds) else None)


@dataclass(frozen=True, slots=True)
class Split:
    """A split of one source: ids in the source file's order."""

    source: str
    salt: str
    n_source: int
    anchors: tuple[str, ...]
    held_out: tuple[str, ...]
    train: tuple[str, ...]
    left_out: Mapping[str, tuple[str, ...]]
    """Questions neither held out nor trained on, by reason (``"yes/no"``, ``"named option"``, ``"echo"``)."""
    held_out_excludable: Mapping[str, int]
    """How many held-out questions would have been left out of training, by reason (they stay held out)."""

    def summary(self) -> dict[str, Any]:
        """The split as JSON-ready data: sizes, the salt, the counts left out and why, and every id."""
        return {
            "source": self.source,
            "salt": self.salt,
            "hash": "sha256(salt NUL id)[:8] / 2**64; held out: the anchors, then the lowest hashes",
            "counts": {
                "source": self.n_source,
                "held_out": len(self.held_out),
                "anchors": len(self.anchors),
                "train": len(self.train),
                "left_out_of_training": {reason: len(ids) for reason, ids in self.left_out.items()},
                "held_out_excludable": dict(self.held_out_excludable),
            },
            "anchors": list(self.anchors),
            "held_out": list(self.held_out),
            "train": list(self.train),
            "left_out_of_training": {reason: list(ids) for reason, ids in self.left_out.items()},
        }


def _field(row: Mapping[str, Any], index: int, name: str) -> Any:
    if name not in row:
        raise ValueError(f"row {index}: no field {name!r}")
    return row[name]


def split_questions(
    rows: Sequence[Mapping[str, Any]],
    *,
    source: str = DEFAULT_SOURCE,
    held_out_size: int = DEFAULT_HELD_OUT_SIZE,
    anchors: Sequence[str] = (),
    salt: str = DEFAULT_SALT,
) -> Split:
    """Split the rows of ``source`` (``metadata.data_source``) of FlashRAG-format ``rows`` (``id``, ``question``,
    ``golden_answers``); rows of other sources are ignored. Raises ``ValueError`` naming the row and field of a
    malformed row, a duplicate id, an anchor that is not a question of the source, or an impossible size."""
    ids: list[str] = []
    texts: dict[str, tuple[str, list[str]]] = {}
    for index, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise ValueError(f"row {index}: not an object")
        metadata = row.get("metadata") or {}
        if not isinstance(metadata, Mapping):
            raise ValueError(f"row {index}: field 'metadata' is not an object")
        if metadata.get("data_source") != source:
            continue
        qid, question, golds = (_field(row, index, name) for name in ("id", "question", "golden_answers"))
        if not isinstance(qid, str) or not qid:
            raise ValueError(f"row {index}: field 'id' must be a non-empty string, got {qid!r}")
        if not isinstance(question, str):
            raise ValueError(f"row {index} ({qid}): field 'question' must be a string")
        if (
            isinstance(golds, str)
            or not isinstance(golds, Sequence)
            or not all(isinstance(g, str) for g in golds)
        ):
            raise ValueError(f"row {index} ({qid}): field 'golden_answers' must be a list of strings")
        if qid in texts:
            raise ValueError(f"row {index}: duplicate id {qid!r}")
        ids.append(qid)
        texts[qid] = (question, list(golds))
    if len(set(anchors)) != len(anchors):
        raise ValueError("anchors: an id is listed twice")
    missing = [a for a in anchors if a not in texts]
    if missing:
        raise ValueError(f"anchors: {len(missing)} not among the {source} questions, e.g. {missing[0]!r}")
    if not len(anchors) <= held_out_size <= len(ids):
        raise ValueError(
            f"held_out_size must lie between the {len(anchors)} anchors and the {len(ids)} {source} questions, "
            f"got {held_out_size}"
        )
    anchored = set(anchors)
    by_hash = sorted((qid for qid in ids if qid not in anchored), key=lambda q: (hash_unit(salt, q), q))
    held = anchored | set(by_hash[: held_out_size - len(anchors)])
    left_out: dict[str, list[str]] = {}
    excludable: dict[str, int] = {}
    train: list[str] = []
    for qid in ids:
        reason = training_exclusion(*texts[qid])
        if qid in held:
            if reason is not None:
                excludable[reason] = excludable.get(reason, 0) + 1
        elif reason is not None:
            left_out.setdefault(reason, []).append(qid)
        else:
            train.append(qid)
    return Split(
        source=source,
        salt=salt,
        n_source=len(ids),
        anchors=tuple(anchors),
        held_out=tuple(qid for qid in ids if qid in held),
        train=tuple(train),
        left_out={reason: tuple(v) for reason, v in sorted(left_out.items())},
        held_out_excludable=dict(sorted(excludable.items())),
    )
