"""Rewards computed while generation runs (``rollout.stream_rewards``): how much reward time hides behind
generation, on the tiny model, CPU.

The same seeded GRPO run twice, streaming on and off (the rewards are the same: tests/test_reward_streaming.py
checks it); after one warm-up step, ``--steps`` steps are timed. Two rewards (``--reward``):

* ``latency``: waits ``--reward-latency-ms`` per row without using the CPU (a remote reward server's
  latency), in ``--workers`` scoring workers;
* ``code``: the code verifier runs one small program per row in its sandbox (the program depends on the
  completion, so every row is a distinct run): real CPU work, which competes with generation on 2 cores.

Printed per reward: the operating point, the rollout (generate + score) and whole step times (median) with
and without streaming, their ratio, and the share of reward time hidden,
``1 - (rollout_stream - generate_stream) / score_off`` (what the streamed step still waits for after
generation, over the reward time of the step without streaming): 1 when the step waits for no reward after generation, 0
when streaming saved nothing.

    .venv/bin/python bench/reward_overlap.py [--reward latency,code] [--reward-latency-ms 100] [--steps 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import warnings

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
warnings.filterwarnings("ignore")

from rewardlab.types import Record, Result  # noqa: E402
from rewardlab.verifiers import Verifier, get_verifier, register_verifier  # noqa: E402

LATENCY_S = 0.1
"""Seconds the ``latency`` reward waits per row (``--reward-latency-ms``; workers inherit it through fork)."""


@register_verifier("_bench_latency", override=True)
class LatencyReward(Verifier):
    """Waits :data:`LATENCY_S` (no CPU), then rewards the share of digits in the completion."""

    def verify(self, record: Record) -> Result:
        time.sleep(LATENCY_S)
        text = record.completion_text
        return Result(reward=sum(ch.isdigit() for ch in text) / max(len(text), 1))


@register_verifier("_bench_code", override=True)
class CodeReward(Verifier):
    """The code verifier on a program made from the completion (``f(x) = x + digits``), tested by ``f(1)
    == 2``: one sandboxed run per row, rewarded when the completion holds exactly one digit."""

    runs_in_process = True  # as the code verifier: its own sandbox, no worker pool

    def __init__(self, **config: object) -> None:
        super().__init__(**config)
        self.code = get_verifier("code")

    def score_batch(self, records: list[Record]) -> list[Result]:
        programs = [
            Record(
                id=r.id,
                completion=f"```python\ndef f(x):\n    return x + {sum(ch.isdigit() for ch in r.completion_text)}\n```",
                reference={"tests": ["assert f(1) == 2"]},
            )
            for r in records
        ]
        return self.code.score_batch(programs)

    def verify(self, record: Record) -> Result:
        return self.score_batch([record])[0]


PROMPTS = [Record(id=i, prompt=f"{i}+{i + 3}=", reference=str(2 * i + 3)) for i in range(64)]


def run(reward: str, stream: bool, args: argparse.Namespace) -> dict[str, float]:
    """Median seconds of the timed steps: generate, score (after generation), rollout, whole step."""
    from rewardlab.data.tiny import build_tiny_model, load_tiny_tokenizer
    from rewardlab.rl.config import load_config
    from rewardlab.rl.trainer import RLTrainer
    from rewardlab.training.metrics import read_metrics

    with tempfile.TemporaryDirectory() as out:
        cfg = load_config(
            preset="grpo",
            overrides=[
                f"train.max_steps={args.steps + 1}",
                f"train.prompts_per_step={args.prompts}",
                f"rollout.n={args.n}",
                f"rollout.max_new_tokens={args.max_new_tokens}",
                f"rollout.batch_size={args.batch_size}",
                f"reward.sources=[{{name: _bench_{reward}}}]",
                f"reward.workers={args.workers}",
                f"rollout.stream_rewards={str(stream).lower()}",
                "train.report_to=none",
                "run.log_completions=0",
                f"run.output_dir={out}",
            ],
        )
        import torch

        torch.manual_seed(0)
        model, tokenizer = build_tiny_model(), load_tiny_tokenizer()
        with RLTrainer(
            cfg, train_records=PROMPTS, eval_records=[], model=model, tokenizer=tokenizer, console=None
        ) as tr:
            tr.train()
        rows = read_metrics(out)[1:]  # the first step warms up
    med = {k: statistics.median(r[f"timing/{k}_s"] for r in rows) for k in ("generate", "score", "step")}
    med["rollout"] = statistics.median(r["timing/generate_s"] + r["timing/score_s"] for r in rows)
    med["reward"] = statistics.median(r["reward"] for r in rows)
    return med


def report(reward: str, args: argparse.Namespace) -> None:
    on, off = run(reward, True, args), run(reward, False, args)
    assert abs(on["reward"] - off["reward"]) < 1e-9, "streaming changed the rewards"
    # The stream run's own generation time: generation times of two runs differ by more than the reward
    # time on a shared machine; the hand-over's cost inside generation shows in the generate ratio.
    hidden = 1 - (on["rollout"] - on["generate"]) / max(off["score"], 1e-9)
    latency = (
        f", {args.reward_latency_ms:g} ms per row in {args.workers} workers" if reward == "latency" else ""
    )
    print(f"\n== reward {reward}{latency}")
    print(
        f"   {args.prompts} prompts x {args.n} samples, max {args.max_new_tokens} new tokens, "
        f"hf batch {args.batch_size} rows, {args.steps} timed steps (median), torch threads {_threads()}"
    )
    print(f"   {'':10} {'generate':>9} {'score':>9} {'rollout':>9} {'step':>9}")
    for name, m in (("off", off), ("stream", on)):
        print(f"   {name:10} {m['generate']:9.2f} {m['score']:9.2f} {m['rollout']:9.2f} {m['step']:9.2f}")
    print(
        f"   rollout stream/off {on['rollout'] / off['rollout']:.2f}, step stream/off {on['step'] / off['step']:.2f}; "
        f"generate stream/off {on['generate'] / off['generate']:.2f}; "
        f"reward time hidden {hidden:.0%} (1 - (rollout_stream - generate_stream) / score_off)"
    )


def _threads() -> int:
    import torch

    return torch.get_num_threads()


def main() -> None:
    global LATENCY_S
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reward", default="latency,code", help="latency, code (comma-separated)")
    parser.add_argument("--reward-latency-ms", type=float, default=100.0)
    parser.add_argument("--workers", type=int, default=4, help="scoring workers of the latency reward")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--n", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument("--batch-size", type=int, default=8, help="hf rows per generate chunk")
    args = parser.parse_args()
    LATENCY_S = args.reward_latency_ms / 1000
    for reward in args.reward.split(","):
        report(reward.strip(), args)


if __name__ == "__main__":
    main()
