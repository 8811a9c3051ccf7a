"""Multi-turn episodes in RL: the episode loop's token layout, the exact loss mask, and a training step."""

from __future__ import annotations

import pytest
import torch

from rewardlab.envs import EnvConfig, Environment, StepResult, ToolEnv, episode_metrics, run_episodes
from rewardlab.generation import Generation, SamplingParams
from rewardlab.rl.config import load_config
from rewardlab.rl.trainer import RLTrainer, build_tensors
from rewardlab.types import Record

CALL, OUTPUT, ANSWER = "<calc>12*3</calc>", "=36;", "\\boxed{36}"


class ScriptedBackend:
    """Plays a fixed script: sample 0 of each prompt calls the calculator then answers; sample 1 answers
    ``\\boxed{35}`` at once. Token-id prompts (later turns) are decoded to find where the episode is."""

    name = "scripted"

    def __init__(self, tokenizer):
        self.tok = tokenizer
        self.calls: list[int] = []

    def _gen(self, text: str, prompt: list[int]) -> Generation:
        ids = self.tok(text, add_special_tokens=False)["input_ids"]
        if not text.endswith("</calc>"):
            ids = ids + [self.tok.eos_token_id]
        return Generation(text, ids, list(prompt), [-0.1] * len(ids), "stop")

    def generate(self, prompts, params):
        self.calls.append(len(prompts))
        out = []
        for prompt in prompts:
            ids = prompt if isinstance(prompt, list) else self.tok(prompt)["input_ids"]
            if isinstance(prompt, list):  # a later turn: the calculator has answered
                out.append([self._gen(ANSWER, ids)])
            else:
                out.append([self._gen(CALL, ids), self._gen("\\boxed{35}", ids)][: params.n])
        return out

    def update_weights(self, model):
        pass

    def release_memory(self):
        pass

    def close(self):
        pass


def _env_config(**kw):
    settings = {
        "name": "tools",
        "tools": ["calculator"],
        "tool_options": {"calculator": {"name": "calc"}},
        "formats": ["tag"],
        "observation_template": "={output};",
        "observation_format": "text",
        "max_turns": 3,
    }
    return EnvConfig(**{**settings, **kw})


def _env(cfg):
    from rewardlab.envs import build_env

    return build_env(cfg)


def test_episode_layout_and_loss_mask(tiny_tokenizer):
    tok = tiny_tokenizer
    cfg = _env_config()
    backend = ScriptedBackend(tok)
    records = [Record(id="a", prompt="12*3=", reference="36")]
    with _env(cfg) as env:
        (group,) = run_episodes(
            backend, env, records, ["12*3="], SamplingParams(n=2, logprobs=True), tok, cfg
        )
    tool, direct = group
    assert backend.calls == [1, 1]  # turn 1: one prompt x 2 samples; turn 2: the one running episode
    call = tok(CALL, add_special_tokens=False)["input_ids"]
    obs = tok(OUTPUT, add_special_tokens=False)["input_ids"]
    answer = tok(ANSWER, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    assert tool.token_ids == call + obs + answer
    assert tool.loss_mask == [1] * len(call) + [0] * len(obs) + [1] * len(answer)
    assert tool.logprobs == [-0.1] * len(call) + [0.0] * len(obs) + [-0.1] * len(answer)
    assert tool.prompt_token_ids == tok("12*3=")["input_ids"]
    assert tool.text == ANSWER and tool.finish_reason == "stop" and tool.state.end == "answer"
    assert tool.transcript.startswith(CALL + OUTPUT)
    assert direct.state.tool_calls == 0 and direct.loss_mask == [1] * len(direct.token_ids)
    m = episode_metrics([e.summary() for e in group])
    assert m["env/tool_call_rate"] == 0.5 and m["env/answered"] == 1.0 and m["env/turns"] == 1.5
    assert m["env/observation_tokens"] == len(obs) / 2

    tensors = build_tensors(group, tok.pad_token_id)
    T = len(tool.token_ids)
    assert tensors["response_mask"][0].tolist() == [1.0] * T
    assert tensors["loss_mask"][0].tolist() == [float(x) for x in tool.loss_mask]
    assert tensors["loss_mask"][1].sum() == len(direct.token_ids)


def test_budget_and_turn_limits_end_as_truncated(tiny_tokenizer):
    tok = tiny_tokenizer
    backend = ScriptedBackend(tok)
    records = [Record(id="a", prompt="12*3=", reference="36")]
    call = len(tok(CALL, add_special_tokens=False)["input_ids"])
    # room for the call but not for the observation: the episode ends on the model's token, truncated
    cfg = _env_config(max_tokens=call + 2)
    with _env(cfg) as env:
        (group,) = run_episodes(backend, env, records, ["12*3="], SamplingParams(n=1), tok, cfg)
    assert (
        group[0].state.end == "budget"
        and group[0].truncated
        and group[0].token_ids == group[0].token_ids[:call]
    )
    assert all(group[0].loss_mask)
    # a budget smaller than the call: the turn is cut, truncated
    cfg = _env_config(max_tokens=5)
    with _env(cfg) as env:
        (group,) = run_episodes(backend, env, records, ["12*3="], SamplingParams(n=1), tok, cfg)
    assert group[0].state.end == "length" and len(group[0].token_ids) == 5 and group[0].truncated
    # one turn only: the call is not run and there is no answer
    cfg = _env_config(max_turns=1)
    with _env(cfg) as env:
        (group,) = run_episodes(backend, env, records, ["12*3="], SamplingParams(n=1), tok, cfg)
    assert (
        group[0].state.end == "max_turns" and group[0].state.tool_calls == 0 and not group[0].state.answered
    )


def _trainer(tmp_path, tok, model, backend, *overrides, reward_fns=()):
    cfg = load_config(
        preset="grpo",
        overrides=[
            "train.max_steps=1",
            "train.prompts_per_step=1",
            "rollout.n=2",
            "rollout.max_new_tokens=16",
            "train.learning_rate=1e-3",
            "train.max_grad_norm=1e9",
            "algorithm.kl_coef=0.0",
            "algorithm.loss_agg_mode=token-mean",
            "reward.sources=[{name: math, kwargs: {mode: strict}}]",
            "train.report_to=none",
            f"run.output_dir={tmp_path / 'run'}",
            *overrides,
        ],
    )
    cfg.env = _env_config()
    records = [Record(id="a", prompt="12*3=", reference="36")]
    return RLTrainer(
        cfg,
        model=model,
        tokenizer=tok,
        train_records=records,
        eval_records=[],
        backend=backend,
        reward_fns=reward_fns,
        console=None,
    )


def _manual_grads(model, tensors, advantages, mask):
    """The GRPO policy gradient at ratio 1 with token-mean aggregation: -sum(A * grad log p * mask) / sum(mask)."""
    model.zero_grad(set_to_none=True)
    T = tensors["responses"].shape[1]
    logits = (
        model(
            input_ids=tensors["input_ids"],
            attention_mask=tensors["attention_mask"],
            position_ids=tensors["position_ids"],
        )
        .logits[:, -T - 1 : -1]
        .float()
    )
    logp = torch.log_softmax(logits, -1).gather(-1, tensors["responses"][..., None]).squeeze(-1)
    (-(advantages * logp * mask).sum() / mask.sum()).backward()
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def test_the_update_trains_on_the_models_tokens_only(tmp_path, tiny_tokenizer, tiny_model):
    """The trainer's gradient on a hand-built episode equals the policy gradient over the model's own tokens
    and differs from the one that would also train on the tool's output."""
    tok = tiny_tokenizer
    trainer = _trainer(tmp_path, tok, tiny_model, ScriptedBackend(tok))
    seen: dict = {}
    optimise = trainer.updater.optimise

    def spy(u):
        seen["u"] = u
        return optimise(u)

    def capture(*args, **kwargs):
        seen["grads"] = {n: p.grad.clone() for n, p in tiny_model.named_parameters() if p.grad is not None}

    trainer.updater.optimise = spy
    trainer.opt.step = capture  # the gradient, not the step: compared below
    trainer.sched.step = lambda *a, **k: None
    with trainer:
        metrics = trainer.train_step()
    u = seen["u"]
    tool_mask = u.tensors["loss_mask"]
    assert u.mask.tolist() == tool_mask.tolist() and (u.tensors["response_mask"] != tool_mask).any()
    assert metrics["reward"] == 0.5 and metrics["env/tool_call_rate"] == 0.5
    assert metrics["num_loss_tokens"] == int(tool_mask.sum())
    want = _manual_grads(tiny_model, u.tensors, u.advantages, tool_mask)
    wrong = _manual_grads(tiny_model, u.tensors, u.advantages, u.tensors["response_mask"])
    for name, grad in seen["grads"].items():
        assert torch.allclose(grad, want[name], atol=1e-6, rtol=1e-4), name
    assert any(not torch.allclose(seen["grads"][n], wrong[n], atol=1e-6, rtol=1e-4) for n in want)


def test_a_training_step_with_the_hf_backend_logs_episode_metrics(tmp_path, tiny_tokenizer, tiny_model):
    """The real tiny model through the hf backend: token-id prompts on later turns, env/* metrics."""

    class AlwaysObserve(Environment):
        """Every turn gets an observation until the turn limit: exercises later turns with any policy (any
        printable character ends a turn, so a random model's turns end before the token limit)."""

        stop = [chr(c) for c in range(33, 127)]

        def step(self, episodes, turns, last):
            return [StepResult(done=True, end="max_turns") if last else StepResult("ok") for _ in turns]

    trainer = _trainer(
        tmp_path, tiny_tokenizer, tiny_model, None, "rollout.max_new_tokens=4", "env.max_tokens=64"
    )
    trainer.env = AlwaysObserve()
    with trainer:
        metrics = trainer.train_step()
    assert metrics["env/turns"] > 1.5 and metrics["env/end/max_turns"] > 0
    assert "env/answered" in metrics and metrics["samples_per_s"] > 0


def test_config_refuses_bad_env_settings():
    from rewardlab.config import ConfigError

    with pytest.raises(ConfigError, match="env.max_turns"):
        load_config(overrides=["env.name=tools", "env.max_turns=0"])
    with pytest.raises(ConfigError, match="env.tools"):
        load_config(overrides=["env.name=tools", "env.tools=[abacus]"])
    with pytest.raises(ConfigError, match="env.name"):
        load_config(overrides=["env.name=gym"])
    assert isinstance(_env(_env_config()), ToolEnv)


QWEN_LIKE = (
    "{% for m in messages %}"
    "{% if m.role == 'tool' %}<|im_start|>user\n<tool_response>\n{{ m.content }}\n</tool_response><|im_end|>\n"
    "{% else %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def test_chat_observations_are_the_templates_tool_message(tiny_tokenizer):
    """With a chat template the observation is what the template writes between an assistant turn and the
    next: end of turn, the tool message, the next assistant header; an end-of-turn the model already
    emitted as EOS is not repeated."""
    import copy

    from rewardlab.envs.rollout import ObservationFormat

    tok = copy.deepcopy(tiny_tokenizer)
    tok.chat_template = QWEN_LIKE
    tool_message = (
        "\n<|im_start|>user\n<tool_response>\n56088\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    )
    fmt = ObservationFormat(tok, "unused {output}", chat=True)
    assert tok.decode(fmt.ids("56088", ended_with_eos=False)) == "<|im_end|>" + tool_message
    tok.eos_token = "<|im_end|>"  # as Qwen's chat models end a turn
    fmt = ObservationFormat(tok, "unused {output}", chat=True)
    assert tok.decode(fmt.ids("56088", ended_with_eos=True)) == tool_message
    assert tok.decode(fmt.ids("56088", ended_with_eos=False)) == "<|im_end|>" + tool_message
    # a template without a tool role: a clear error, not a silent drop of every observation
    tok.chat_template = (
        "{% for m in messages %}{% if m.role != 'tool' %}{{ m.content }}{% endif %}{% endfor %}"
    )
    with pytest.raises(ValueError, match="drops tool messages"):
        ObservationFormat(tok, "unused {output}", chat=True)
    tok.chat_template = "{{ raise_exception('Conversation roles must alternate') }}"
    with pytest.raises(ValueError, match="observation_format: text"):
        ObservationFormat(tok, "unused {output}", chat=True)


def test_rollout_importance_weights_skip_observation_tokens(tmp_path, tiny_tokenizer, tiny_model):
    """The hf backend's log-probs equal the trainer's on the model's tokens; observation tokens carry the
    sampler's 0, which would give ratios far from 1 if they entered the correction."""

    class AlwaysObserve(Environment):
        stop = [chr(c) for c in range(33, 127)]

        def step(self, episodes, turns, last):
            return [StepResult(done=True, end="max_turns") if last else StepResult("ok") for _ in turns]

    trainer = _trainer(
        tmp_path,
        tiny_tokenizer,
        tiny_model,
        None,
        "rollout.max_new_tokens=4",
        "env.max_tokens=64",
        "algorithm.rollout_is=token",
        "algorithm.rollout_is_cap=100.0",
        "rollout.n=4",
        "reward.sources=[]",
        reward_fns=(lambda prompts, completions, references: [float(i) for i in range(len(completions))],),
    )
    trainer.env = AlwaysObserve()
    with trainer:
        metrics = trainer.train_step()
    assert metrics["env/observation_tokens"] > 0
    assert metrics["rollout_is/ratio_max"] == pytest.approx(1.0, abs=1e-3)
    assert metrics["rollout_is/ratio_min"] == pytest.approx(1.0, abs=1e-3)


def _qwen_tokenizer(tiny_tokenizer):
    import copy
    from pathlib import Path

    tok = copy.deepcopy(tiny_tokenizer)
    tok.chat_template = (Path(__file__).parent / "data" / "qwen2.5_chat_template.jinja").read_text()
    tok.eos_token = "<|im_end|>"  # Qwen2.5's chat models end a turn with it
    return tok


def test_qwen25_template_tool_messages_and_calls(tiny_tokenizer):
    """Qwen2.5's own chat template (tests/data): the observation is its tool message, and a tool call as
    the template writes it is read by the ``tool_call`` format, its turn ending at the stop string."""
    from rewardlab.envs.parsing import parse_tool_calls, stop_strings
    from rewardlab.envs.rollout import ObservationFormat

    tok = _qwen_tokenizer(tiny_tokenizer)
    fmt = ObservationFormat(tok, "unused {output}", chat=True)
    response = (
        "\n<|im_start|>user\n<tool_response>\n56088\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    )
    assert tok.decode(fmt.ids("56088", ended_with_eos=True)) == response
    assert tok.decode(fmt.ids("56088", ended_with_eos=False)) == "<|im_end|>" + response
    call = {"name": "python", "arguments": {"code": "print(123 * 456)"}}
    messages = [
        {"role": "user", "content": "123*456?"},
        {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": call}]},
    ]
    rendered = tok.apply_chat_template(messages, tokenize=False)
    turn = rendered[rendered.rindex("<|im_start|>assistant") + len("<|im_start|>assistant") :]
    turn = turn[: turn.index("</tool_call>") + len("</tool_call>")]  # where the model's turn stops
    assert stop_strings(["tool_call"], ["python"]) == ["</tool_call>"]
    (parsed,) = parse_tool_calls(turn, ["tool_call"], {"python": "code"})
    assert (parsed.name, parsed.arguments, parsed.error) == ("python", call["arguments"], None)
    # the whole conversation, as the episode's tokens would hold it, equals the template's rendering
    prompt = tok.apply_chat_template(messages[:1], tokenize=False, add_generation_prompt=True)
    episode = prompt + turn[1:] + "<|im_end|>" + response
    full = tok.apply_chat_template(
        [*messages, {"role": "tool", "content": "56088"}], tokenize=False, add_generation_prompt=True
    )
    assert episode == full
