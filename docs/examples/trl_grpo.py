"""GRPO with TRL, rewarded by rewardlab's math verifier.

``reward_function("math")`` turns rewardlab's math verifier into a TRL reward function: TRL passes it the
prompts, the completions and the dataset's ``solution`` column; it scores them in a warm worker pool (a row
that hangs is cut at ``timeout`` seconds and scores 0) and returns one reward per completion. TRL logs them
as ``rewards/math/mean``; the function adds ``rewardlab/math/errors`` (the fraction of rows the verifier
could not score, e.g. no answer found) and puts each row's extracted answer and error in TRL's completions
table.

Everything here runs offline on a CPU in seconds: the policy is rewardlab's tiny random Qwen2 model with a
character-level tokenizer (``rewardlab.data.tiny``), so its answers are noise and its rewards mostly 0. For
a real run, load a real model and tokenizer and raise the lengths and steps.

    python docs/examples/trl_grpo.py --output-dir /tmp/trl-grpo --steps 2

The test suite runs this file (``tests/test_integration_trl.py``), so it stays in step with the library.
"""

from __future__ import annotations

import argparse
from typing import Any

from datasets import Dataset
from trl import GRPOConfig, GRPOTrainer

from rewardlab.data.arithmetic import generate
from rewardlab.data.tiny import build_tiny_model, load_tiny_tokenizer
from rewardlab.integrations.trl import reward_function


def arithmetic_dataset(n: int) -> Dataset:
    """``n`` one-digit sums and differences: a ``prompt`` column and the gold answer as ``solution``."""
    rows = generate(n, seed=0, max_value=4)
    return Dataset.from_list([{"prompt": row["prompt"], "solution": row["reference"]} for row in rows])


def main(
    output_dir: str = "trl-grpo-out", steps: int = 2, max_completion_length: int = 12, **config: Any
) -> GRPOTrainer:
    """Trains ``steps`` GRPO steps and returns the trainer (its ``state.log_history`` has the metrics).

    ``config``: more :class:`trl.GRPOConfig` settings."""
    math_reward = reward_function("math", reference="solution", workers=1, timeout=10)
    settings: dict[str, Any] = dict(
        output_dir=output_dir,
        max_steps=steps,
        per_device_train_batch_size=4,  # 2 prompts x 2 completions per step
        num_generations=2,
        max_completion_length=max_completion_length,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        use_cpu=True,
        bf16=False,
        seed=0,
    )
    settings.update(config)
    trainer = GRPOTrainer(
        model=build_tiny_model(),
        reward_funcs=[math_reward],
        args=GRPOConfig(**settings),
        train_dataset=arithmetic_dataset(2 * steps),
        processing_class=load_tiny_tokenizer(),
    )
    try:
        trainer.train()
    finally:
        math_reward.close()  # stops the scoring workers (garbage collection and exit would too)
    return trainer


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output-dir", default="trl-grpo-out")
    parser.add_argument("--steps", type=int, default=2)
    args = parser.parse_args()
    for entry in main(args.output_dir, args.steps).state.log_history:
        if "loss" in entry:
            print({k: v for k, v in entry.items() if k.startswith(("reward", "rewardlab", "loss"))})
