"""A tiny Llama made on the spot: a model folder a real vLLM engine serves with random weights.

No download and no weight file: a `config.json` (hidden 256, 4 heads of 64, 2 KV heads, 2 layers;
vLLM's CPU attention kernels refuse head sizes of 16), a byte-level BPE tokenizer trained in about a
second on a fixed text, and a chat template that renders messages and tools. vLLM serves it with
`load_format="dummy"` (random weights, the same in every process), so its text is meaningless but
everything else is real: tokenizer, chat template, KV cache, sampling, structured output, usage.

`autellix up --backend vllm --model tiny`, the tests and the benchmarks use it; the folder is made
once per path and reused (its files are written atomically, so concurrent makers agree).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

TINY_MODEL_ALIAS = "tiny"  # `--model tiny` means this model, made under the state dir
VOCAB_SIZE = 512
MAX_POSITION_EMBEDDINGS = 131_072
_TRAINING_WORDS = ("the quick brown fox jumps over the lazy dog plan the next step call a tool read the "
                   "file run the tests answer the user with json").split()

# role: content lines; tools (when given) first as JSON; tool calls of earlier turns as JSON
CHAT_TEMPLATE = (
    "{% if tools %}tools: {{ tools | tojson }}\n{% endif %}"
    "{% for m in messages %}{{ m['role'] }}: "
    "{% if m['content'] is string %}{{ m['content'] }}"
    "{% elif m['content'] %}{% for p in m['content'] %}{% if p['type'] == 'text' %}{{ p['text'] }}{% endif %}"
    "{% endfor %}{% endif %}"
    "{% if m['tool_calls'] %} {{ m['tool_calls'] | tojson }}{% endif %}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)


def _atomic_write(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def _train_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    words = _TRAINING_WORDS
    text = [" ".join(words[(i + j) % len(words)] for j in range(12)) + f" {i}" for i in range(2000)]
    tok.train_from_iterator(text, trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE, special_tokens=["<unk>", "<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    return tok


def make_tiny_model(path: str | os.PathLike) -> Path:
    """Write the model folder at `path` (if not there yet) and return it."""
    folder = Path(path)
    if (folder / "config.json").is_file():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    tok = _train_tokenizer()
    _atomic_write(folder / "tokenizer.json", tok.to_str())
    _atomic_write(folder / "tokenizer_config.json", json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>",
        "unk_token": "<unk>", "model_max_length": MAX_POSITION_EMBEDDINGS, "chat_template": CHAT_TEMPLATE}))
    _atomic_write(folder / "generation_config.json", json.dumps({"bos_token_id": 1, "eos_token_id": 2}))
    _atomic_write(folder / "config.json", json.dumps({  # written last: its presence means complete
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256,
        "intermediate_size": 512, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "vocab_size": tok.get_vocab_size(), "max_position_embeddings": MAX_POSITION_EMBEDDINGS,
        "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "torch_dtype": "bfloat16", "bos_token_id": 1,
        "eos_token_id": 2, "tie_word_embeddings": False}))
    return folder
