"""A tiny llama-architecture GGUF with random weights, written with the `gguf` package (llama.cpp's own writer).

A few MB: two layers, Q8_0 matrices, a 512-token SentencePiece vocabulary with byte fallback (so any text
tokenizes) and a ChatML template, so llama-server loads it and /v1/chat/completions works. The same
architecture is written as the workload's config.json, so the plan sizes the file it serves.
"""

from __future__ import annotations

import json
import string
from pathlib import Path

#: The workload's `model:` (a Hugging Face config.json); the file is written to match it.
CONFIG: dict[str, object] = json.loads((Path(__file__).parent / "fixtures" / "config.json").read_text())
CHATML = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
          "'<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
_NORMAL, _UNKNOWN, _CONTROL, _BYTE = 1, 2, 3, 6


def _vocab(size: int) -> tuple[list[str], list[float], list[int]]:
    """SentencePiece-style pieces: <unk> <s> </s>, the 256 byte-fallback tokens, then short pieces."""
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [_UNKNOWN, _CONTROL, _CONTROL] + [_BYTE] * 256
    chars = string.ascii_lowercase + string.ascii_uppercase + string.digits + ".,!?"
    pieces = ["▁"] + [c for c in chars] + [f"▁{c}" for c in chars]
    pieces += [a + b for a in string.ascii_lowercase for b in string.ascii_lowercase]
    tokens += pieces[: size - len(tokens)]
    types += [_NORMAL] * (len(tokens) - len(types))
    if len(tokens) != size:
        raise ValueError(f"vocabulary of {len(tokens)} pieces, config says {size}")
    scores = [0.0] * 259 + [-float(i) for i in range(size - 259)]
    return tokens, scores, types


def write_tiny_gguf(path: Path, *, seed: int = 0) -> Path:
    """Write the model to `path` (Q8_0 matrices, F32 norms) and return it."""
    import gguf  # the e2e extra: imported here so the default test run collects without it
    import numpy as np

    c = CONFIG
    n_embd, n_ff, n_layer = int(c["hidden_size"]), int(c["intermediate_size"]), int(c["num_hidden_layers"])
    n_head, n_kv, n_vocab = int(c["num_attention_heads"]), int(c["num_key_value_heads"]), int(c["vocab_size"])
    head_dim = n_embd // n_head
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("infragen-e2e-tiny")
    w.add_context_length(int(c["max_position_embeddings"]))
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_kv)
    w.add_rope_dimension_count(head_dim)
    w.add_rope_freq_base(float(c["rope_theta"]))
    w.add_layer_norm_rms_eps(float(c["rms_norm_eps"]))
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
    tokens, scores, types = _vocab(n_vocab)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(True)
    w.add_chat_template(CHATML)

    def matrix(name: str, rows: int, cols: int) -> None:
        data = (rng.standard_normal((rows, cols)) * 0.02).astype(np.float32)
        q = gguf.quants.quantize(data, gguf.GGMLQuantizationType.Q8_0)
        w.add_tensor(name, q, raw_dtype=gguf.GGMLQuantizationType.Q8_0)

    def norm(name: str) -> None:
        w.add_tensor(name, np.ones(n_embd, dtype=np.float32))

    matrix("token_embd.weight", n_vocab, n_embd)
    for i in range(n_layer):
        norm(f"blk.{i}.attn_norm.weight")
        matrix(f"blk.{i}.attn_q.weight", n_embd, n_embd)
        matrix(f"blk.{i}.attn_k.weight", n_kv * head_dim, n_embd)
        matrix(f"blk.{i}.attn_v.weight", n_kv * head_dim, n_embd)
        matrix(f"blk.{i}.attn_output.weight", n_embd, n_embd)
        norm(f"blk.{i}.ffn_norm.weight")
        matrix(f"blk.{i}.ffn_gate.weight", n_ff, n_embd)
        matrix(f"blk.{i}.ffn_up.weight", n_ff, n_embd)
        matrix(f"blk.{i}.ffn_down.weight", n_embd, n_ff)
    norm("output_norm.weight")
    matrix("output.weight", n_vocab, n_embd)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
