"""rewardlab's verifiers as verl's reward function, on a tiny batch (CPU only, no model, no Ray cluster).

In a verl (0.9.1) run, point the custom reward function at rewardlab, on the command line::

    python -m verl.trainer.main_ppo ... \\
        reward.custom_reward_function.path=pkg://rewardlab.integrations.verl \\
        reward.custom_reward_function.name=compute_score \\
        +reward.custom_reward_function.reward_kwargs.timeout=10 \\
        +reward.custom_reward_function.reward_kwargs.routes.my_gsm8k=math

or in the YAML::

    reward:
      custom_reward_function:
        path: pkg://rewardlab.integrations.verl   # pkg://: imported by name, so Ray pickles it by reference
        name: compute_score                      # compute_score_batch for verl's BatchRewardManager
        reward_kwargs:                           # passed to every call
          workers: 4                             # worker processes per source
          timeout: 10                            # seconds per row; a slower row scores 0 with error "timeout"
          default_source: math                   # for data sources no route names (else an error row)
          routes:                                # over rewardlab.integrations.verl.ROUTES
            my_gsm8k: {source: math, settings: {mode: gsm8k}, reference: text}

Rows are routed by ``data_source``: verl's own names (``openai/gsm8k``, ``lighteval/MATH``,
``searchR1_nq``, ``codecontests``, ...) go to rewardlab's ``math``, ``qa`` and ``code`` verifiers; each
returns verl's dict form (``score``, ``acc``, ``pred``, ``error``, ...), which verl keeps in
``reward_extra_info``.

This script does what verl's reward worker does: ``load_reward_manager`` reads the config above, and the
reward loop's ``NaiveRewardManager`` scores each response of a ``DataProto``.

    .venv/bin/python docs/examples/verl_reward.py
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import torch
from omegaconf import OmegaConf
from verl import DataProto
from verl.trainer.ppo.reward import load_reward_manager

from rewardlab.data.tiny import load_tiny_tokenizer

CONFIG = {
    "reward": {
        "custom_reward_function": {
            "path": "pkg://rewardlab.integrations.verl",
            "name": "compute_score",
            "reward_kwargs": {
                "workers": 2,
                "timeout": 10,
                "routes": {
                    "my_gsm8k": {"source": "math", "settings": {"mode": "gsm8k"}, "reference": "text"}
                },
            },
        },
        "reward_manager": {"source": "register", "name": "naive"},
    }
}

# (data_source, prompt, response, ground truth), in verl's dataset formats
ROWS: list[tuple[str, str, str, Any]] = [
    ("openai/gsm8k", "2 + 70?", "2 + 70 = 72.\n#### 72", "72"),
    ("openai/gsm8k", "2 + 70?", "2 + 70 = 73.\n#### 73", "72"),
    ("lighteval/MATH", "Half?", "It is $\\boxed{\\frac{1}{2}}$.", "\\frac12"),
    ("searchR1_nq", "Capital of France?", "<answer> Paris </answer>", {"target": np.array(["Paris"])}),
    ("my_gsm8k", "6 * 7?", "#### 42", "42"),
]


def tiny_batch(rows: list[tuple[str, str, str, Any]], tokenizer: Any) -> DataProto:
    """A ``DataProto`` laid out as verl's rollout leaves it: left-padded prompts, right-padded responses, one
    attention mask over both, and ``data_source`` / ``reward_model`` in the non-tensor batch."""
    prompts = [tokenizer.encode(prompt) for _, prompt, _, _ in rows]
    responses = [tokenizer.encode(response) for _, _, response, _ in rows]
    p_len, r_len, pad = max(map(len, prompts)), max(map(len, responses)), tokenizer.pad_token_id
    prompt_ids = torch.tensor([[pad] * (p_len - len(p)) + p for p in prompts])
    response_ids = torch.tensor([r + [pad] * (r_len - len(r)) for r in responses])
    mask = torch.tensor(
        [
            [0] * (p_len - len(p)) + [1] * len(p) + [1] * len(r) + [0] * (r_len - len(r))
            for p, r in zip(prompts, responses, strict=True)
        ]
    )
    return DataProto.from_dict(
        tensors={
            "prompts": prompt_ids,
            "responses": response_ids,
            "input_ids": torch.cat([prompt_ids, response_ids], dim=1),
            "attention_mask": mask,
        },
        non_tensors={
            "data_source": np.array([source for source, _, _, _ in rows], dtype=object),
            "reward_model": np.array(
                [{"ground_truth": gt, "style": "rule"} for *_, gt in rows], dtype=object
            ),
            "extra_info": np.array([{"index": i} for i in range(len(rows))], dtype=object),
        },
    )


async def _score(batch: DataProto, tokenizer: Any) -> list[dict[str, Any]]:
    # verl's reward worker: its own loader reads path, name and reward_kwargs; one run_single per response,
    # all at once (the manager calls compute_score from a thread pool).
    manager = load_reward_manager(OmegaConf.create(CONFIG), tokenizer)
    return await asyncio.gather(*(manager.run_single(batch[i : i + 1]) for i in range(len(batch))))


def main() -> list[dict[str, Any]]:
    """Scores :data:`ROWS` the way verl does; returns the manager's outputs (``reward_score``,
    ``reward_extra_info``) per row."""
    tokenizer = load_tiny_tokenizer()
    outputs = asyncio.run(_score(tiny_batch(ROWS, tokenizer), tokenizer))
    for (source, _, response, _), out in zip(ROWS, outputs, strict=True):
        info = out["reward_extra_info"]
        score, pred, error = out["reward_score"], info["pred"], info["error"]
        print(f"{source:16} {response!r:40} score={score} pred={pred!r} error={error}")
    return outputs


if __name__ == "__main__":
    main()
