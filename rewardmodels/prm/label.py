"""Monte Carlo step labelling (Math-Shepherd, Wang et al. 2024): how good is a step? Finish the solution
from it several times and see how often the answer comes out right.

For a solution with steps ``s_1..s_n`` and a gold answer, the policy completes the prefix ``s_1..s_i``
``k`` times (for every ``i < n``); each completion -- the rollout's text alone, never the prefix, so that
only its own final answer counts -- is checked by a verifier against the reference. Step
``i`` gets the **soft** label ``c_i / k`` (the fraction of completions that reach the right answer) and the
**hard** label ``1 if c_i > 0`` (any of them does). The last step needs no rollouts: the solution itself is
verified. ``labels`` in the output are the soft or hard ones (``label_type``); both are kept in
``soft_labels`` / ``hard_labels``.

Generation goes through a rollout backend (``rewardlab.generation``: ``hf`` on CPU, ``vllm`` on GPU); all
prefixes of all solutions are sent in one ``generate`` call with ``n=k`` so the backend batches them.
Verification goes through :func:`rewardlab.scoring.score_records` (parallel workers, per-item timeout).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rewardlab.generation import SamplingParams, get_backend
from rewardlab.progress import progress_bar
from rewardlab.rewardmodels.prm.data import StepExample
from rewardlab.scoring import score_records
from rewardlab.types import Record


@dataclass
class LabelConfig:
    """Options of :func:`label_steps` (the ``rewardlab rm label-steps`` flags)."""

    k: int = 8
    """Completions per step prefix (Math-Shepherd: N = 8)."""
    label_type: str = "soft"
    """Which labels go into ``labels``: ``"soft"`` (fraction correct) or ``"hard"`` (any correct)."""
    temperature: float = 1.0
    """Sampling temperature of the completions (1.0 samples the policy's own distribution, which is what the
    success-probability estimate is of)."""
    top_p: float = 1.0
    """Nucleus sampling mass."""
    max_new_tokens: int = 512
    """Longest completion."""
    seed: int | None = 0
    """Sampling seed (``None``: global RNG)."""
    step_joiner: str = "\n"
    """How steps are joined into the solution text the policy continues and the verifier reads."""
    prompt_separator: str = "\n"
    """Text between the prompt and the first step when no chat template is used."""
    use_chat_template: bool = True
    """Put the prompt in the tokenizer's chat template (when it has one) before the steps."""
    stop: tuple[str, ...] = ()
    """Stop strings of the completions."""
    verifier_workers: int = 1
    """Worker processes of the verifier (1: in this process)."""
    verifier_timeout: float = 10.0
    """Per-completion verification timeout in seconds."""
    early_stop: bool = False
    """Once a step's soft label is 0, label every later step 0 without rollouts (a saving that assumes no
    later step recovers; off by default, as Math-Shepherd rolls out every step)."""
    batch_size: int = 256
    """Step prefixes rolled out and verified per round (bounds the texts held at once; the progress bar
    moves once per round)."""

    def __post_init__(self) -> None:
        if self.label_type not in ("soft", "hard"):
            raise ValueError("label_type must be 'soft' or 'hard'")
        if self.k < 1:
            raise ValueError("k must be at least 1")
        if self.batch_size < 1:
            raise ValueError("batch_size must be at least 1")


def _prefix_text(tokenizer: Any, prompt: str, config: LabelConfig) -> str:
    if config.use_chat_template and tokenizer is not None and getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True
        )
    return prompt + config.prompt_separator


def _score(records: list[Record], verifier: Any, config: LabelConfig) -> list[float]:
    results = score_records(
        records, verifier, workers=config.verifier_workers, timeout=config.verifier_timeout
    )
    return [1.0 if (r.error is None and r.reward >= 0.5) else 0.0 for r in results]


def _roll_out(
    prefixes: list[tuple[int, int]],
    examples: Sequence[StepExample],
    backend: Any,
    params: Any,
    tokenizer: Any,
    verifier: Any,
    config: LabelConfig,
) -> list[float]:
    """The soft label (share of k completions verified right) of each ``(solution, step)`` prefix."""
    prompts, partials = [], []
    for e, i in prefixes:
        ex = examples[e]
        partial = config.step_joiner.join(ex.steps[: i + 1]) + config.step_joiner
        partials.append(partial)
        prompts.append(_prefix_text(tokenizer, ex.prompt, config) + partial)
    groups = backend.generate(prompts, params)
    records = []
    for (e, i), partial, gens in zip(prefixes, partials, groups, strict=True):
        ex = examples[e]
        for g in gens:
            # Only the rollout's own final answer counts: verifying prefix + rollout would let a fallback
            # extractor (the last number) read an intermediate result of the prefix when the rollout states
            # no answer, crediting a wrong step.
            records.append(
                Record(
                    id=f"{ex.id}:{i}",
                    prompt=ex.prompt,
                    completion=g.text,
                    reference=ex.reference,
                    metadata={"prefix": partial},
                )
            )
    oks = _score(records, verifier, config)
    k = config.k
    return [sum(oks[j * k : (j + 1) * k]) / k for j in range(len(prefixes))]


def label_steps(
    examples: Sequence[StepExample],
    backend: Any,
    verifier: Any = "math",
    config: LabelConfig | None = None,
    *,
    tokenizer: Any = None,
    progress: bool | None = False,
) -> list[StepExample]:
    """Labels every step of ``examples`` by Monte Carlo completion (see the module docstring).

    Args:
        examples: Solutions as steps, each with a ``reference`` (gold answer) for the verifier.
        backend: A rollout backend (``generate(prompts, SamplingParams)``).
        verifier: A verifier name or reward source judging a full solution against the reference.
        config: Options.
        tokenizer: The policy's tokenizer (for its chat template); taken from ``backend.tokenizer`` if unset.
        progress: A bar of step prefixes labelled (``None``: only when stderr is a terminal).

    Returns:
        New examples with ``labels`` set and ``metadata`` holding ``soft_labels``, ``hard_labels``,
        ``rollouts`` (k) and ``labelled_by`` (``"monte_carlo"``).
    """

    config = config or LabelConfig()
    tokenizer = tokenizer if tokenizer is not None else getattr(backend, "tokenizer", None)
    missing = [ex.id for ex in examples if ex.reference is None]
    if missing:
        raise ValueError(f"Monte Carlo labelling needs a reference answer; missing for ids {missing[:5]}")

    # Final steps: verify the solution itself.
    finals = [
        Record(
            id=ex.id, prompt=ex.prompt, completion=config.step_joiner.join(ex.steps), reference=ex.reference
        )
        for ex in examples
    ]
    final_ok = _score(finals, verifier, config) if finals else []

    soft: list[list[float | None]] = [[None] * len(ex.steps) for ex in examples]
    for e, ex in enumerate(examples):
        if ex.steps:
            soft[e][-1] = final_ok[e]

    params = SamplingParams(
        n=config.k,
        temperature=config.temperature,
        top_p=config.top_p,
        max_new_tokens=config.max_new_tokens,
        stop=list(config.stop),
        seed=config.seed,
        logprobs=False,
    )
    # With early_stop, prefixes are rolled out in waves (step 1 of every solution, then step 2 of those
    # still alive...) so that a solution stops costing rollouts after its first hopeless step.
    jobs = [(e, i) for e, ex in enumerate(examples) for i in range(len(ex.steps) - 1)]
    waves: list[list[tuple[int, int]]]
    if config.early_stop:
        depth = max((len(ex.steps) for ex in examples), default=0)
        waves = [[(e, i) for e, i in jobs if i == d] for d in range(depth)]
    else:
        waves = [jobs]
    dead: set[int] = set()
    with progress_bar(len(jobs), "label steps", unit="prefix", enabled=progress) as bar:
        for wave in waves:
            alive = [(e, i) for e, i in wave if e not in dead]
            bar.update(len(wave) - len(alive))
            for first in range(0, len(alive), config.batch_size):
                chunk = alive[first : first + config.batch_size]
                values = _roll_out(chunk, examples, backend, params, tokenizer, verifier, config)
                for (e, i), value in zip(chunk, values, strict=True):
                    soft[e][i] = value
                    if config.early_stop and value == 0.0:
                        dead.add(e)
                bar.update(len(chunk))
    out = []
    for e, ex in enumerate(examples):
        s = list(soft[e])
        if config.early_stop:
            # Steps never rolled out after a hopeless one inherit its 0 (the final step keeps its check).
            for i in range(len(s) - 1):
                if s[i] is None:
                    s[i] = 0.0
        hard = [None if v is None else (1.0 if v > 0 else 0.0) for v in s]
        labels = s if config.label_type == "soft" else hard
        meta = {
            **ex.metadata,
            "soft_labels": s,
            "hard_labels": hard,
            "rollouts": config.k,
            "labelled_by": "monte_carlo",
        }
        out.append(
            StepExample(
                prompt=ex.prompt,
                steps=list(ex.steps),
                labels=labels,
                reference=ex.reference,
                id=ex.id,
                metadata=meta,
            )
        )
    return out


def label_steps_with_policy(
    examples: Sequence[StepExample],
    policy: str | Any,
    verifier: Any = "math",
    config: LabelConfig | None = None,
    *,
    tokenizer: Any = None,
    backend: str = "hf",
    backend_kwargs: dict[str, Any] | None = None,
    progress: bool | None = False,
) -> list[StepExample]:
    """:func:`label_steps` with a backend built from a policy (a path / hub name or a loaded model)."""

    if tokenizer is None:
        if not isinstance(policy, str):
            raise ValueError("pass the tokenizer with a loaded policy model")
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(policy)
    model = policy
    if backend == "hf" and isinstance(policy, str):
        import torch
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained(policy)
        if torch.cuda.is_available():
            model.to("cuda")
    engine = get_backend(backend, model, tokenizer, **(backend_kwargs or {}))
    try:
        return label_steps(examples, engine, verifier, config, tokenizer=tokenizer, progress=progress)
    finally:
        close = getattr(engine, "close", None)
        if close:
            close()


__all__ = ["LabelConfig", "label_steps", "label_steps_with_policy"]
