"""The tiny tokenizer and model configs the project ships, so tests and the demo run with no hub access.

* The tokenizer is character-level (one token per printable ASCII character, plus newline and tab, and
  special tokens); it is a real ``PreTrainedTokenizerFast`` saved under ``data/tiny/tokenizer``.
* Model configs are real transformers architectures (Qwen2 by default) built from config with random
  weights. ``head_dim`` is 64 because vLLM's CPU attention kernels refuse smaller heads.
* One trained model ships: ``models/qwen2-tiny-reader/`` (weights and tokenizer, loadable with
  ``from_pretrained``), a ``qwen2-tiny`` pretrained to read answers out of given passages, the search
  demo's base (``rewardlab.demos.reader`` rebuilds it; ``pretraining.json`` there says how).

Everything that takes a model also takes any hub name or local path; these are only the offline defaults.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

TINY_DIR = Path(__file__).resolve().parent  # the package holds its data files, installed or editable
TOKENIZER_DIR = TINY_DIR / "tokenizer"
MODEL_CONFIG_DIR = TINY_DIR / "models"

PAD, EOS, BOS, UNK = "<pad>", "<|endoftext|>", "<s>", "<unk>"
CHAT_TOKENS = ("<|im_start|>", "<|im_end|>")
SPECIAL_TOKENS = (PAD, EOS, BOS, UNK, *CHAT_TOKENS)
# ChatML, as Qwen2 uses; add_generation_prompt opens the assistant turn.
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def tokenizer_path() -> str:
    """Folder of the shipped character-level tokenizer (loadable with ``AutoTokenizer.from_pretrained``)."""
    return str(TOKENIZER_DIR)


def model_config_path(name: str = "qwen2-tiny") -> str:
    """Path of a shipped model config JSON (``qwen2-tiny``, ``llama-tiny``, ``qwen2-small``)."""
    return str(MODEL_CONFIG_DIR / f"{name}.json")


def build_char_tokenizer(with_chat_template: bool = False):
    """Builds the character-level tokenizer from scratch (what ``data/tiny/tokenizer`` holds)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    chars = ["\n", "\t"] + [chr(c) for c in range(32, 127)]
    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS)}
    for ch in chars:
        vocab.setdefault(ch, len(vocab))
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    backend.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    backend.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token=PAD,
        eos_token=EOS,
        bos_token=BOS,
        unk_token=UNK,
        additional_special_tokens=list(CHAT_TOKENS),
        model_max_length=2048,
        padding_side="left",
    )
    if with_chat_template:
        tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def load_tiny_tokenizer(with_chat_template: bool = False):
    """Loads the shipped tokenizer through ``AutoTokenizer`` (the same path a hub tokenizer takes)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_path())
    if with_chat_template:
        tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def tiny_model_config(name: str = "qwen2-tiny", **overrides: Any):
    """A transformers config built from a shipped JSON, with ``vocab_size`` and token ids set to the tokenizer's."""
    from transformers import AutoConfig

    spec = json.loads(Path(model_config_path(name)).read_text())
    spec.update(overrides)
    model_type = spec.pop("model_type")
    return AutoConfig.for_model(model_type, **spec)


def build_tiny_model(name: str = "qwen2-tiny", seed: int = 0, **overrides: Any):
    """A randomly initialised causal LM of a shipped config (a real transformers class, float32)."""
    import torch
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    config = tiny_model_config(name, **overrides)
    return AutoModelForCausalLM.from_config(config, dtype=torch.float32)


def save_tiny_model(path: str | Path, name: str = "qwen2-tiny", seed: int = 0, **overrides: Any) -> str:
    """Builds a tiny model and saves it with the tokenizer in Hugging Face format; returns the folder."""
    path = Path(path)
    model = build_tiny_model(name, seed=seed, **overrides)
    model.save_pretrained(path)
    load_tiny_tokenizer().save_pretrained(path)
    return str(path)


def _write_shipped_files() -> None:  # run once by a developer: python -m rewardlab.data.tiny
    TOKENIZER_DIR.mkdir(parents=True, exist_ok=True)
    build_char_tokenizer().save_pretrained(TOKENIZER_DIR)


if __name__ == "__main__":
    _write_shipped_files()
