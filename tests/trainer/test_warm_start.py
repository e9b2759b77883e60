"""The warm start: demonstrations in every method's format through the real rollout loop, masked SFT, the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.agent.conftest import PASSAGES, KeywordSearcher
from trainer.config import METHODS, ConfigError
from trainer.demonstrations import (
    MAX_CONCLUSION_WORDS,
    SEARCH_R1_CONCLUSION_WORDS,
    build_demonstrations,
    conclusion_from,
    needs_search,
    plan_for,
    tokenized,
)
from trainer.warm_start import check_inputs, main, sft_config, warm_start_config

ROWS = [
    {
        "id": "q1",
        "question": "Who designed the tower in the capital of France?",
        "golden_answers": ["Gustave Eiffel"],
        "metadata": {
            "data_source": "hotpotqa",
            "split": "train",
            "supporting_titles": ["Paris", "Eiffel Tower"],
        },
    },
    {
        "id": "q2",
        "question": "Where was the engineer of the Eiffel Tower born?",
        "golden_answers": ["Dijon"],
        "metadata": {"data_source": "2wiki", "split": "train", "supporting_titles": ["Gustave Eiffel"]},
    },
    {
        "id": "ck1",
        "question": "What is the capital of Germany?",
        "golden_answers": ["Berlin"],
        "metadata": {"data_source": "common_knowledge", "single_hop_common_knowledge": True},
    },
]


@pytest.mark.parametrize("method", METHODS)
def test_every_demonstration_parses_as_valid_in_paper_mode(method: str, tokenizer: Any) -> None:
    plans = [plan for row in ROWS if (plan := plan_for(row)) is not None]
    demos = build_demonstrations(method, plans, KeywordSearcher(PASSAGES), tokenizer, max_turns=3)
    assert [d.valid for d in demos] == [True, True, True], [(d.error, d.rollout.text) for d in demos]
    assert [d.searches for d in demos] == [
        2,
        1,
        0,
    ]  # one search per supporting fact; none for common knowledge
    searched = demos[0].rollout
    # the passages are what the retriever returned, inserted by the environment, as in an RL rollout
    env = "".join(s.text for s in searched.segments if s.source == "env")
    assert "Paris is the capital and largest city of France." in env
    # each query is written from a fact's title (the one the question names first) and the question's words
    assert sorted(q.split(" ")[0] for q in searched.queries) == ["Eiffel", "Paris"]
    assert "designed" in searched.queries[0]


def test_retrieved_and_prompt_tokens_get_no_loss(tokenizer: Any) -> None:
    plan = plan_for(ROWS[0])
    assert plan is not None
    [demo] = build_demonstrations("hiprag", [plan], KeywordSearcher(PASSAGES), tokenizer)
    example = tokenized(demo, tokenizer)
    prompt = len(tokenizer.encode(demo.rollout.prompt, add_special_tokens=False))
    assert set(example["labels"][:prompt]) == {-100}
    at = prompt
    for segment in demo.rollout.segments:
        width = len(segment.token_ids or tokenizer.encode(segment.text, add_special_tokens=False))
        labels = example["labels"][at : at + width]
        if segment.source == "env":
            assert set(labels) == {-100}, segment.text
        else:
            assert labels == example["input_ids"][at : at + width]
        at += width
    assert example["labels"][-1] == tokenizer.eos_token_id  # it learns to stop after the answer


def test_a_conclusion_is_a_short_plain_sentence_of_the_hops_own_passage() -> None:
    observation = (
        "Doc 1(Title: Empress Xiaomucheng) Empress Xiaomucheng (1781 – 17 February 1808) was a consort of the "
        "Daoguang Emperor. She was one year his senior.\n"
        "Doc 2(Title: Victoria Falls (waterfall)) Victoria Falls (Tokaleya Tonga: Mosi - oa - Tunya) is a "
        "waterfall in southern Africa on the Zambezi River at the border between Zambia and Zimbabwe.\n"
        "Doc 3(Title: Daoguang Emperor) The Daoguang Emperor (16 September 1782 – 26 February 185"
    )
    question = "Which emperor married Empress Xiaomucheng?"
    # the passage titled as the hop, without its parentheticals (what small models copy into loops)
    assert conclusion_from(observation, "Empress Xiaomucheng", question) == (
        "Empress Xiaomucheng was a consort of the Daoguang Emperor."
    )
    # a title with parentheses still names its passage; a long sentence ends at a clause boundary
    assert conclusion_from(observation, "Victoria Falls (waterfall)", "Where is Victoria Falls?") == (
        "Victoria Falls is a waterfall in southern Africa on the Zambezi River."
    )
    # the hop's passage was cut inside a parenthetical, leaving no sentence: another passage's best one
    assert conclusion_from(observation, "Daoguang Emperor", question) == (
        "Empress Xiaomucheng was a consort of the Daoguang Emperor."
    )
    assert conclusion_from("", "Nowhere", question) == "Nothing was found about Nowhere."


def test_a_conclusion_survives_hostile_passages() -> None:
    # nested and unbalanced parentheses, control and bidi characters: dropped, not copied into a demonstration
    hostile = "Doc 1(Title: X) X ((was) born) in Paris)) in 1900 \x00\u202e(and then."
    assert conclusion_from(hostile, "X", "Where was X born?") == "X in Paris in 1900."
    # a million spaces before a parenthesis, a million open parentheses: linear, not a regex's quadratic time
    assert conclusion_from(" " * 1_000_000 + "(x", "X", "q") == "Nothing was found about X."
    assert conclusion_from("Doc 1(Title: X) " + "(" * 1_000_000, "X", "q") == "Nothing was found about X."


def test_search_r1s_conclusion_is_shorter_than_hiprags(tokenizer: Any) -> None:
    """Search-R1's turn holds the conclusion and the next search, HiPRAG's conclusion is a turn of its own: with
    the same passage, Search-R1's conclusion is cut to SEARCH_R1_CONCLUSION_WORDS, HiPRAG's to
    MAX_CONCLUSION_WORDS (recipe 6: Search-R1's turns fit the 64-token turn budget with room to spare)."""
    long_eiffel = (
        "Eiffel Tower\nThe Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, designed "
        "by Gustave Eiffel's company and completed for the world's fair of 1889."
    )
    searcher = KeywordSearcher([PASSAGES[0], ("1", long_eiffel), *PASSAGES[2:]])
    plan = plan_for(ROWS[0])
    assert plan is not None and plan.hops[0][0] == "Eiffel Tower"
    [search_r1] = build_demonstrations("search_r1", [plan], searcher, tokenizer)
    [hiprag] = build_demonstrations("hiprag", [plan], searcher, tokenizer)
    second_think = search_r1.rollout.text.split("<think>")[2].split("</think>")[0]
    conclusion = second_think.split(" Search 2 of 2:")[0]
    assert conclusion.startswith("The Eiffel Tower is") and conclusion.endswith(".")
    assert len(conclusion.split()) <= SEARCH_R1_CONCLUSION_WORDS < MAX_CONCLUSION_WORDS
    hiprag_conclusion = hiprag.rollout.text.split("<conclusion>")[1].split("</conclusion>")[0]
    assert len(conclusion.split()) < len(hiprag_conclusion.split()) <= MAX_CONCLUSION_WORDS


def test_a_demonstration_with_a_turn_over_the_turn_budget_is_left_out(tokenizer: Any) -> None:
    plan = plan_for(ROWS[0])
    assert plan is not None
    [free] = build_demonstrations("hiprag", [plan], KeywordSearcher(PASSAGES), tokenizer)
    longest = max(len(s.token_ids or ()) for s in free.rollout.segments if s.source == "model")
    [fits] = build_demonstrations(
        "hiprag", [plan], KeywordSearcher(PASSAGES), tokenizer, max_turn_tokens=longest
    )
    assert fits.valid, fits.error
    [cut] = build_demonstrations(
        "hiprag", [plan], KeywordSearcher(PASSAGES), tokenizer, max_turn_tokens=longest - 1
    )
    assert not cut.valid
    assert cut.error == f"a model turn of {longest} tokens exceeds the turn budget ({longest - 1})"


def test_the_no_search_rule() -> None:
    assert not needs_search(ROWS[2])
    assert not needs_search(
        {"question": "Name a city", "golden_answers": ["x"], "metadata": {"data_source": "demo_single"}}
    )
    # an answer inside a comparison question still needs the facts of both sides
    comparison = {"question": "Which is older, Paris or Berlin?", "golden_answers": ["Paris"], "metadata": {}}
    assert needs_search(comparison)
    assert needs_search(ROWS[0])


def test_a_bad_config_names_its_field(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="methods"):
        warm_start_config(
            {
                "output_dir": "x",
                "index": "i",
                "model": {"path": "m"},
                "data": {"path": "d"},
                "methods": ["nope"],
            }
        )
    with pytest.raises(ConfigError, match="index"):
        warm_start_config({"output_dir": "x", "model": {"path": "m"}, "data": {"path": "d"}})
    with pytest.raises(ConfigError, match=r"data.path: .*no.jsonl is not a file"):
        check_inputs(
            warm_start_config(
                {
                    "output_dir": "x",
                    "index": str(tmp_path),
                    "model": {"path": "m"},
                    "data": {"path": "no.jsonl"},
                }
            )
        )
    questions = tmp_path / "q.jsonl"
    questions.write_text("")
    with pytest.raises(ConfigError, match=r"index: .*nowhere is not an index folder"):
        check_inputs(
            warm_start_config(
                {
                    "output_dir": "x",
                    "index": "nowhere",
                    "model": {"path": "m"},
                    "data": {"path": str(questions)},
                }
            )
        )


@pytest.mark.slow
def test_the_cli_warm_starts_a_model_that_loads_as_a_policy(tmp_path: Path) -> None:
    from retrieval.index import IndexConfig, build_index

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": i, "contents": c}) + "\n" for i, c in PASSAGES))
    build_index(corpus, tmp_path / "index", IndexConfig(kind="bm25"))
    questions = tmp_path / "questions.jsonl"
    questions.write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    out = tmp_path / "warm"
    config = tmp_path / "warm.json"
    config.write_text(
        json.dumps(
            {
                "output_dir": str(out),
                "index": str(tmp_path / "index"),
                "methods": ["hiprag", "search_r1"],
                "model": {"path": "tiny-random"},  # a byte-level tokenizer: long sequences
                "max_turn_tokens": 1000,  # ... and long turns: 64, the demo's, would leave out every one
                "data": {"path": str(questions), "questions_per_method": 2},
                "training": {
                    "epochs": 1,
                    "batch_size": 2,
                    "gradient_accumulation_steps": 1,
                    "max_length": 8192,
                },
            }
        )
    )
    assert main([str(config)]) == 0
    summary = json.loads((out / "warm_start.json").read_text())
    assert summary["methods"]["hiprag"]["used"] >= 2 and summary["methods"]["hiprag"]["no_search"] >= 1
    keys = {json.loads(line)["key"] for line in (out / "metrics.jsonl").read_text().splitlines()}
    assert {"loss", "learning_rate"} <= keys
    assert json.loads((out / "progress.json").read_text())["phase"] == "done"
    from transformers import AutoModelForCausalLM

    assert AutoModelForCausalLM.from_pretrained(out, local_files_only=True) is not None


def test_only_the_top_layers_train_when_asked(model: Any) -> None:
    from trainer.models import freeze_lower_layers

    freeze_lower_layers(model, 1)  # the tiny model has 2 layers
    trainable = {
        name.split(".")[2] for name, p in model.named_parameters() if p.requires_grad and ".layers." in name
    }
    assert trainable == {"1"}
    assert not model.model.embed_tokens.weight.requires_grad
    assert model.model.norm.weight.requires_grad


def test_a_cached_demo_warm_model_of_an_older_recipe_is_rebuilt(tmp_path: Path, monkeypatch: Any) -> None:
    from trainer import warm_start

    target = tmp_path / "models" / warm_start.WARM_MODEL_NAME
    target.mkdir(parents=True)
    (target / "config.json").write_text("{}")
    (target / "warm_start.json").write_text("{}")  # from before recipes were recorded: recipe 1
    assert warm_start.demo_warm_model_recipe(target) == 1 != warm_start.DEMO_RECIPE
    built: list[Any] = []

    def fake_run(config: Any) -> dict[str, Any]:
        built.append(config)
        summary = {"examples": 3, "demo_recipe": config.demo_recipe}  # as run() writes it
        (target / "warm_start.json").write_text(json.dumps(summary))
        return summary

    monkeypatch.setattr(warm_start, "run", fake_run)

    assert warm_start.ensure_demo_warm_model(tmp_path, None) == target
    assert len(built) == 1 and built[0].output_dir == str(target)
    assert built[0].demo_recipe == warm_start.DEMO_RECIPE
    warm_start.ensure_demo_warm_model(tmp_path, None)
    assert len(built) == 1  # the current recipe's model is reused


@pytest.mark.parametrize("trainable", [2, 4, 30])
def test_the_cached_trainer_makes_the_same_updates_as_training_the_whole_model(
    tmp_path: Path, trainable: int
) -> None:
    """Frozen layers computed once, shared prompt prefixes once, the LM head only where the loss is: the same
    weights after six steps as a plain loop over the whole model (full logits, every label), with the same
    optimizer, schedule and order. With every layer trained (4 of 4, or 30 of 4 as the demo's recipe 5 asks of any
    base) only the embeddings are computed once."""
    import torch
    from torch.nn import functional
    from transformers import get_cosine_schedule_with_warmup

    from trainer.models import freeze_lower_layers, tiny_model, tiny_tokenizer
    from trainer.progress import ProgressReporter
    from trainer.warm_start import shared_prefixes, step_batches
    from trainer.warm_start_cached import train_cached

    tokenizer = tiny_tokenizer()
    generator = torch.Generator().manual_seed(0)

    def tokens(n: int) -> list[int]:
        return torch.randint(0, len(tokenizer) - 2, (n,), generator=generator).tolist()

    # Two methods' prompts (36 and 40 shared tokens), and one demonstration that shares nothing.
    prompts = [tokens(36), tokens(40)]
    examples = []
    for group, length in ((0, 70), (1, 81), (0, 66), (1, 90), (0, 75), (None, 60)):
        ids = (prompts[group] if group is not None else []) + tokens(length)
        labels = [-100 if (i < 48 or i % 7 == 0) else t for i, t in enumerate(ids)]
        examples.append({"input_ids": ids, "labels": labels})
    assert shared_prefixes(examples) == [36, 40, 36, 40, 36, 0]
    config = warm_start_config(
        {
            "output_dir": str(tmp_path),
            "index": "-",
            "model": {"path": "tiny-random"},
            "data": {"path": "-"},
            "training": {
                "epochs": 2,
                "batch_size": 2,
                "gradient_accumulation_steps": 1,
                "trainable_layers": trainable,
            },
        }
    )
    cached = tiny_model(tokenizer, layers=4, seed=1)
    plain = tiny_model(tokenizer, layers=4, seed=1)
    train_cached(config, cached, examples, ProgressReporter(tmp_path))

    freeze_lower_layers(plain, trainable)
    assert not plain.model.embed_tokens.weight.requires_grad  # the tied embeddings stay as they are
    params = [p for p in plain.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=config.training.learning_rate, weight_decay=0.0)
    steps = step_batches(len(examples), 2, 2, config.training.seed)
    schedule = get_cosine_schedule_with_warmup(optimizer, 2, len(steps))
    for batch in steps:
        tokens = sum(sum(1 for y in examples[i]["labels"][1:] if y != -100) for i in batch)
        for i in batch:
            logits = plain(input_ids=torch.tensor([examples[i]["input_ids"]])).logits[0, :-1]
            target = torch.tensor(examples[i]["labels"][1:])
            (functional.cross_entropy(logits, target, ignore_index=-100, reduction="sum") / tokens).backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()

    assert len(steps) == 6  # 3 steps an epoch (2, 2, 2 demonstrations), 2 epochs
    for (name, a), b in zip(cached.named_parameters(), plain.parameters(), strict=True):
        assert torch.allclose(a, b, atol=1e-5), name
    assert any(
        not torch.equal(a, b)
        for a, b in zip(
            cached.parameters(), tiny_model(tokenizer, layers=4, seed=1).parameters(), strict=True
        )
    )
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert {r["key"] for r in rows} == {"loss", "learning_rate", "grad_norm", "epoch"}
    assert max(r["step"] for r in rows) == 6


def test_a_redundant_search_goes_into_the_chosen_share_and_the_budgets_must_have_room_for_it(
    tokenizer: Any,
) -> None:
    from types import SimpleNamespace

    from agent.rollout import RolloutConfig, room_for_another_search
    from trainer.warm_start import choose_plans, rollout_tokens_for

    values: dict[str, Any] = {
        "output_dir": "-",
        "index": "-",
        "model": {"path": "tiny-random"},
        "data": {"path": "-", "redundant_search_share": 1.0, "no_search_share": 0.0},
        "methods": ["hiprag", "search_r1"],
    }
    with pytest.raises(ConfigError) as turns:
        warm_start_config(values)  # 3 turns: two needed searches and the answer, no room for a third
    assert turns.value.field == "max_turns"
    with pytest.raises(ConfigError) as tokens:
        warm_start_config({**values, "max_turns": 4})  # 512 tokens a rollout
    assert tokens.value.field == "max_rollout_tokens" and "764" in str(tokens.value)
    # 764 = what room_for_another_search needs before a third search when every turn fills its 64 tokens
    budget = RolloutConfig(max_new_tokens=64, max_obs_tokens=100, max_rollout_tokens=764)
    step = 2 * 64 + 100 + 16
    assert rollout_tokens_for(3, 64, 100) == 764
    assert room_for_another_search(SimpleNamespace(tokens_left=764 - 2 * step), budget)  # type: ignore[arg-type]
    assert not room_for_another_search(SimpleNamespace(tokens_left=512 - 2 * step), budget)  # type: ignore[arg-type]

    config = warm_start_config({**values, "max_turns": 4, "max_rollout_tokens": 768})
    plans = choose_plans(config, ROWS, [])
    for method in config.methods:
        assert sorted(p.redundant for p in plans[method]) == ["known", "repeat"]
        demos = build_demonstrations(
            method, plans[method], KeywordSearcher(PASSAGES), tokenizer, max_turns=config.max_turns
        )
        assert all(d.valid for d in demos), [(d.error, d.rollout.text) for d in demos]
        for plan, demo in zip(plans[method], demos, strict=True):
            assert demo.searches == len(plan.hops) and demo.redundant == plan.redundant
            first, last = demo.rollout.queries[0], demo.rollout.queries[-1]
            assert last == first if plan.redundant == "repeat" else last == plan.hops[0][0]

    half = warm_start_config(
        {
            **values,
            "max_turns": 4,
            "max_rollout_tokens": 768,
            "data": {**values["data"], "redundant_search_share": 0.5},
        }
    )
    assert sorted(p.redundant for p in choose_plans(half, ROWS, [])["hiprag"]) == ["", "repeat"]


def test_search_r1_turns_count_their_searches_up_to_the_answer(tokenizer: Any) -> None:
    # Recipe 4: the model's own count says when the last search is done, whatever the passages held.
    plan = plan_for(ROWS[0])
    assert plan is not None
    (demo,) = build_demonstrations("search_r1", [plan], KeywordSearcher(PASSAGES), tokenizer, max_turns=3)
    turns = [s.text for s in demo.rollout.segments if s.source == "model"]
    assert demo.valid, demo.error
    assert turns[0].startswith("<think>This needs 2 searches. Search 1 of 2: ")
    assert "Search 2 of 2: " in turns[1] and "<search>" in turns[1]
    assert "That was search 2 of 2. So the answer is Gustave Eiffel.</think>" in turns[2]
    assert turns[2].endswith("<answer> Gustave Eiffel </answer>")


@pytest.mark.parametrize("on_gpu", [False, True])
def test_the_plain_warm_start_trains_on_the_gpu_when_there_is_one(tmp_path: Path, on_gpu: bool) -> None:
    config = warm_start_config(
        {"output_dir": str(tmp_path), "index": "i", "model": {"path": "m"}, "data": {"path": "d"}}
    )

    args = sft_config(config, on_gpu=on_gpu)

    assert args.use_cpu is not on_gpu
    assert args.learning_rate == config.training.learning_rate
