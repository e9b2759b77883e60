"""Write searchlab's small demo data set (team-written passages, questions and agent trajectories).

    python demo/make_demo_data.py      # rewrites demo/*.jsonl

The passages are short encyclopedic sentences written by the team; the trajectories show a Search-R1 baseline
that searches for everything next to a HiPRAG-style agent that searches only when it must, so the compare page and
the over-/under-search metrics have something real to show. Deterministic: no randomness.
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent

# (id, title, text)
PASSAGES = [
    (
        "p1",
        "Titanic (1997 film)",
        "Titanic is a 1997 American epic romance and disaster film directed, written and co-produced by James Cameron. It won eleven Academy Awards, including Best Picture.",
    ),
    (
        "p2",
        "70th Academy Awards",
        "The 70th Academy Awards ceremony was held on March 23, 1998, in Los Angeles. Titanic won Best Picture and tied the record for the most wins.",
    ),
    (
        "p3",
        "James Cameron",
        "James Cameron is a Canadian filmmaker known for Titanic, Avatar and The Terminator.",
    ),
    (
        "p4",
        "Marie Curie",
        "Marie Curie was a physicist and chemist born in Warsaw, in what was then the Kingdom of Poland. She was the first woman to win a Nobel Prize.",
    ),
    (
        "p5",
        "Radium",
        "Radium is a chemical element discovered in 1898 by Marie Curie and Pierre Curie in Paris.",
    ),
    (
        "p6",
        "Amazon River",
        "The Amazon River in South America flows through Peru, Colombia and Brazil and empties into the Atlantic Ocean in northern Brazil.",
    ),
    (
        "p7",
        "Brazil",
        "Brazil is the largest country in South America. Its capital is Brasília and its largest city is São Paulo.",
    ),
    (
        "p8",
        "Blade Runner",
        "Blade Runner is a 1982 science fiction film directed by Ridley Scott, loosely based on the novel Do Androids Dream of Electric Sheep?",
    ),
    (
        "p9",
        "Do Androids Dream of Electric Sheep?",
        "Do Androids Dream of Electric Sheep? is a 1968 science fiction novel by the American writer Philip K. Dick.",
    ),
    ("p10", "Oxygen", "Oxygen is the chemical element with the symbol O and atomic number 8."),
    (
        "p11",
        "Turing test",
        "The Turing test was proposed by Alan Turing in his 1950 paper Computing Machinery and Intelligence.",
    ),
    (
        "p12",
        "Alan Turing",
        "Alan Turing was an English mathematician and computer scientist. He was born in 1912 and died in 1954 in Wilmslow.",
    ),
    (
        "p13",
        "Eiffel Tower",
        "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France, completed in 1889.",
    ),
    (
        "p14",
        "Louvre",
        "The Louvre is the world's most-visited art museum, located on the Right Bank of the Seine in Paris.",
    ),
    (
        "p15",
        "Seine",
        "The Seine is a river in northern France that flows through Paris into the English Channel at Le Havre.",
    ),
    ("p16", "Lima", "Lima is the capital and largest city of Peru, on the country's Pacific coast."),
    (
        "p17",
        "Peru",
        "Peru is a country in western South America. Its official languages are Spanish, Quechua and Aymara; Spanish is spoken by most of the population.",
    ),
    (
        "p18",
        "Mars",
        "Mars is the fourth planet from the Sun. It is often called the Red Planet because of the iron oxide on its surface.",
    ),
    (
        "p19",
        "The Magic Flute",
        "The Magic Flute is an opera in two acts by Wolfgang Amadeus Mozart, first performed in Vienna in 1791.",
    ),
    (
        "p20",
        "Wolfgang Amadeus Mozart",
        "Wolfgang Amadeus Mozart was a prolific composer of the Classical period, born in Salzburg in 1756.",
    ),
    (
        "p21",
        "Pierre Curie",
        "Pierre Curie was a French physicist who shared the 1903 Nobel Prize in Physics with Marie Curie and Henri Becquerel.",
    ),
    (
        "p22",
        "Ridley Scott",
        "Ridley Scott is an English filmmaker who directed Alien, Blade Runner and Gladiator.",
    ),
    ("p23", "São Paulo", "São Paulo is the most populous city in Brazil and in the Southern Hemisphere."),
    (
        "p24",
        "Avatar (2009 film)",
        "Avatar is a 2009 epic science fiction film written and directed by James Cameron.",
    ),
]

# (id, question, golds, dataset, supporting passage ids, answer needs search?)
QUESTIONS = [
    (
        "q1",
        "Who directed the film that won Best Picture at the 1998 Academy Awards?",
        ["James Cameron"],
        "demo_multihop",
        ["p2", "p1"],
        True,
    ),
    (
        "q2",
        "In which country was the scientist who discovered radium born?",
        ["Poland", "Kingdom of Poland"],
        "demo_multihop",
        ["p5", "p4"],
        True,
    ),
    (
        "q3",
        "What is the capital of the country where the Amazon River meets the sea?",
        ["Brasília", "Brasilia"],
        "demo_multihop",
        ["p6", "p7"],
        True,
    ),
    (
        "q4",
        "Who wrote the novel on which the film Blade Runner is based?",
        ["Philip K. Dick"],
        "demo_multihop",
        ["p8", "p9"],
        True,
    ),
    (
        "q5",
        "In what year did the man who proposed the Turing test die?",
        ["1954"],
        "demo_multihop",
        ["p11", "p12"],
        True,
    ),
    (
        "q6",
        "Which river flows through the city where the Louvre is?",
        ["Seine", "the Seine"],
        "demo_multihop",
        ["p14", "p15"],
        True,
    ),
    (
        "q7",
        "What language do most people speak in the country whose capital is Lima?",
        ["Spanish"],
        "demo_multihop",
        ["p16", "p17"],
        True,
    ),
    ("q8", "Which chemical element has atomic number 8?", ["Oxygen"], "demo_single", ["p10"], False),
    ("q9", "In which city is the Eiffel Tower?", ["Paris"], "demo_single", ["p13"], False),
    ("q10", "Which planet is known as the Red Planet?", ["Mars"], "demo_single", ["p18"], False),
    (
        "q11",
        "Who composed the opera The Magic Flute?",
        ["Wolfgang Amadeus Mozart", "Mozart"],
        "demo_single",
        ["p19"],
        False,
    ),
    ("q12", "Who was the first woman to win a Nobel Prize?", ["Marie Curie"], "demo_single", ["p4"], False),
]

PASSAGE_BY_ID = {pid: (title, text) for pid, title, text in PASSAGES}
# What each agent answers (None = the gold's first form). The baseline gets two multi-hop questions wrong.
BASELINE_WRONG = {"q3": "São Paulo", "q5": "1950"}
METHOD_WRONG = {"q5": "1950"}


def _docs(passage_ids: list[str]) -> str:
    # Search-R1's document layout (scoring.observations.format_passage): Doc i(Title: ...) text
    return "\n".join(
        f"Doc {i + 1}(Title: {PASSAGE_BY_ID[p][0]}) {PASSAGE_BY_ID[p][1]}" for i, p in enumerate(passage_ids)
    )


def baseline_response(qid: str, question: str, golds: list[str], support: list[str]) -> str:
    """Search-R1: one search per supporting passage, plus a confirming search even on easy questions."""
    parts = []
    for pid in support:
        title = PASSAGE_BY_ID[pid][0]
        parts.append(
            f"<think>I need to find information about {title}.</think>\n<search> {title} </search>\n\n"
        )
        parts.append(f"<information>{_docs([pid])}</information>\n\n")
    if len(support) == 1:  # the baseline over-searches: it checks the obvious once more
        parts.append(f"<think>Let me double check.</think>\n<search> {question} </search>\n\n")
        parts.append(f"<information>{_docs(support)}</information>\n\n")
    answer = BASELINE_WRONG.get(qid, golds[0])
    parts.append(
        f"<think>Based on the documents, the answer is {answer}.</think>\n<answer> {answer} </answer>"
    )
    return "".join(parts)


def hiprag_response(qid: str, question: str, golds: list[str], support: list[str], needs_search: bool) -> str:
    """HiPRAG's parsable steps: a non-search step when the answer is known, a search step when it is not."""
    answer = METHOD_WRONG.get(qid, golds[0])
    steps = []
    if needs_search:
        for pid in support:
            title, text = PASSAGE_BY_ID[pid]
            steps.append(
                "<step>\n"
                f"    <reasoning>I do not know this fact about {title} reliably, so I search.</reasoning>\n"
                f"    <search>{title}</search>\n"
                f"    <context>{_docs([pid])}</context>\n"
                f"    <conclusion>{text.split('. ')[0]}.</conclusion>\n"
                "</step>\n"
            )
    else:
        steps.append(
            "<step>\n"
            f"    <reasoning>This is common knowledge: {PASSAGE_BY_ID[support[0]][1]}</reasoning>\n"
            f"    <conclusion>The answer is {answer}.</conclusion>\n"
            "</step>\n"
        )
    return "<think>\n" + "".join(steps) + f"</think>\n<answer>{answer}</answer>"


# The team's own judgement of each step, as a careful judge would give it (judge_model "team-labels"):
# a search for a fact the agent could not know is not over-search; searching common knowledge is.
def baseline_verdicts(support: list[str], needs_search: bool) -> list[dict[str, object]]:
    searches = len(support) + (1 if len(support) == 1 else 0)
    verdicts = [
        {
            "detector": "over_search",
            "step": i,
            "outcome": "false" if needs_search else "true",
            "judge_model": "team-labels",
        }
        for i in range(searches)
    ]
    verdicts.append(
        {"detector": "under_search", "step": searches, "outcome": "false", "judge_model": "team-labels"}
    )
    return verdicts


def hiprag_verdicts(support: list[str], needs_search: bool) -> list[dict[str, object]]:
    if needs_search:
        return [
            {"detector": "over_search", "step": i, "outcome": "false", "judge_model": "team-labels"}
            for i in range(len(support))
        ]
    return [{"detector": "under_search", "step": 0, "outcome": "false", "judge_model": "team-labels"}]


def _write(name: str, rows: list[dict[str, object]]) -> None:
    with (HERE / name).open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")


TITLES = {pid: title for pid, title, _ in PASSAGES}


def main() -> None:
    _write("corpus.jsonl", [{"id": pid, "contents": f"{title}\n{text}"} for pid, title, text in PASSAGES])
    _write(
        "questions.jsonl",
        [
            {
                "id": qid,
                "question": q,
                "golden_answers": golds,
                # supporting_titles as wiki_multihop names them (the evidence judge and the warm start read them)
                "metadata": {
                    "data_source": ds,
                    "supporting_ids": sup,
                    "supporting_titles": [TITLES[p] for p in sup],
                },
            }
            for qid, q, golds, ds, sup, _ in QUESTIONS
        ],
    )
    baseline, method = [], []
    for qid, question, golds, dataset, support, needs_search in QUESTIONS:
        baseline.append(
            {
                "question_id": qid,
                "format": "search_r1",
                "dataset": dataset,
                "method": "search_r1",
                "response": baseline_response(qid, question, golds, support),
                "verdicts": baseline_verdicts(support, needs_search),
            }
        )
        method.append(
            {
                "question_id": qid,
                "format": "hiprag",
                "dataset": dataset,
                "method": "hiprag",
                "response": hiprag_response(qid, question, golds, support, needs_search),
                "verdicts": hiprag_verdicts(support, needs_search),
            }
        )
    _write("trajectories_search_r1.jsonl", baseline)
    _write("trajectories_hiprag.jsonl", method)


if __name__ == "__main__":
    main()
