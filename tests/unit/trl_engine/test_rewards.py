"""Rewards for TRL: the single-GPU LoRA recipe's pair for reasoning-format, adapted per-sample functions otherwise."""

from __future__ import annotations

from typing import Any

from grpo_trainer.engines.trl.rewards import builtin_reward_funcs, completion_text, per_sample_reward

GOOD = "<REASONING>2+2</REASONING><SOLUTION>4</SOLUTION>"


def test_completion_text_reads_both_forms() -> None:
    assert completion_text([{"role": "assistant", "content": "hi"}]) == "hi"
    assert completion_text([{"role": "assistant", "content": [{"type": "text", "text": "a"}]}]) == "a"
    assert completion_text("plain") == "plain"
    assert completion_text(None) == ""


def test_reasoning_format_is_the_seeds_two_functions() -> None:
    formatting, correctness = builtin_reward_funcs("reasoning-format")
    completions = [[{"role": "assistant", "content": GOOD}], [{"role": "assistant", "content": "4"}]]
    assert formatting(prompts=[None, None], completions=completions) == [1.0, -2.0]
    assert correctness(prompts=[None, None], completions=completions, answer=["4", "4"]) == [2.0, 0.0]


def test_per_sample_functions_are_called_once_per_completion() -> None:
    calls: list[tuple[Any, ...]] = []

    def compute_score(data_source: str, solution: str, truth: str, extra_info: Any = None, **kw: Any) -> Any:
        calls.append((data_source, solution, truth, extra_info, kw))
        return {"score": 1.0} if solution == truth else 0.0

    reward = per_sample_reward(compute_score, "mine", {"scale": "2"})
    scores = reward(
        prompts=[None, None],
        completions=["a", "b"],
        answer=["a", "a"],
        data_source=["src", "src"],
        extra_info=['{"index": 1}', None],
    )
    assert scores == [1.0, 0.0]
    assert calls[0] == ("src", "a", "a", {"index": 1}, {"scale": "2"})
    assert reward.__name__ == "mine_score"


def test_geo3k_builtin_is_adapted() -> None:
    (reward,) = builtin_reward_funcs("geo3k")
    scores = reward(prompts=[None], completions=["<think>x</think> \\boxed{3}"], answer=["3"])
    assert scores[0] > 0.9
