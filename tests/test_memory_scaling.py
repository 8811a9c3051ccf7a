"""Peak memory of an RL update grows with tokens, not with tokens x vocabulary.

One GRPO update with KL (policy and reference passes, entropy with its gradient) of the tiny Qwen2 at two
response lengths and two vocabulary sizes (Qwen2.5's, and a small one), each in a fresh process (peak
resident memory is a process's high-water mark). With the full logits, every response token costs several
float32 copies of a vocabulary row (0.6 MB each at 152k); from the hidden states in chunks, only one chunk's
logits exist at a time, so what a token adds is the same at either vocabulary size.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

VOCAB = 151_936
SMALL_VOCAB = 1024
ROWS = 2
CHUNK = 64
VOCAB_ROW = VOCAB * 4  # bytes of one token's float32 logits


def one_update(response_tokens: int, vocab: int, chunk: int) -> int:
    """Runs in the child: the peak resident memory (bytes) that one update adds to the process."""
    import torch

    sys.path.insert(0, str(Path(__file__).parent))
    from test_rl_packing import digits_reward

    from rewardlab.data.tiny import build_tiny_model, load_tiny_tokenizer
    from rewardlab.generation import Generation
    from rewardlab.rl.config import load_config
    from rewardlab.rl.trainer import RLTrainer, Rollout
    from rewardlab.types import Record

    torch.manual_seed(0)
    torch.set_num_threads(1)
    tokenizer = load_tiny_tokenizer()
    prompt = tokenizer.encode("12 + 30 = ", add_special_tokens=False)
    gens = [
        Generation("", torch.randint(3, 100, (response_tokens,)).tolist(), prompt, None, "length")
        for _ in range(ROWS)
    ]
    records = [Record(id=i, prompt="12 + 30 = ", completion="", metadata={"group": 0}) for i in range(ROWS)]
    overrides = [
        "train.max_steps=1", "train.prompts_per_step=1", f"rollout.n={ROWS}", "reward.sources=[]",
        f"rollout.max_new_tokens={response_tokens}", f"train.per_device_train_batch_size={ROWS}",
        "algorithm.kl_coef=0.04", "algorithm.entropy_coef=0.01", "train.skip_zero_advantage=false",
        f"train.logprob_chunk_tokens={chunk}", "train.report_to=none", f"run.output_dir={tempfile.mkdtemp(prefix='rk-memory-')}",
    ]  # fmt: skip
    cfg = load_config(preset="grpo", overrides=overrides)
    model = build_tiny_model(vocab_size=vocab)
    with RLTrainer(
        cfg, model=model, tokenizer=tokenizer, train_records=records, eval_records=[],
        reward_fns=[digits_reward], console=None,
    ) as trainer:  # fmt: skip
        rollout = Rollout(gens, trainer.reward_pipeline.score(records, gens))
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        trainer._update(rollout)
        return (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024


def _peak(response_tokens: int, vocab: int, chunk: int = CHUNK) -> int:
    args = [str(v) for v in (response_tokens, vocab, chunk)]
    out = subprocess.run([sys.executable, __file__, *args], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # four processes, two of them at Qwen2.5's vocabulary: about 45 s on 2 cores
def test_update_memory_grows_with_tokens_not_tokens_times_vocabulary():
    short, long = 64, 512
    extra_tokens = ROWS * (long - short)
    grown = {vocab: _peak(long, vocab) - _peak(short, vocab) for vocab in (SMALL_VOCAB, VOCAB)}
    vocabulary_term = (grown[VOCAB] - grown[SMALL_VOCAB]) / extra_tokens
    # The full logits cost about 4 vocabulary rows per token (bench/memory.py --rl-step); the chunked path
    # must add no measurable share of one.
    assert vocabulary_term < 0.05 * VOCAB_ROW, f"{vocabulary_term / VOCAB_ROW:.2f} vocabulary rows per token"


if __name__ == "__main__":
    print(json.dumps(one_update(*(int(v) for v in sys.argv[1:]))))
