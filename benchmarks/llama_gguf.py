"""One writer of llama-architecture GGUF files with random weights (the `gguf` package, llama.cpp's own writer),
for the end-to-end boot's tiny model (tests/e2e/tiny_gguf.py: Q8_0) and the CPU benchmark's TinyLlama-shaped
file (benchmarks/llama_bench_cpu.py: F16). Shapes come from a Hugging Face config.json; nothing here is tuned.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

#: SentencePiece token types (gguf.TokenType): normal, unknown, control, byte.
_NORMAL, _UNKNOWN, _CONTROL, _BYTE = 1, 2, 3, 6
#: Matrix encodings the writer knows: Q8_0 blocks (gguf's quantizer) or F16.
MatrixType = Literal["q8_0", "f16"]
#: Synthetic vocabulary after the byte tokens: "chars" (single letters, digits, punctuation and letter pairs, so
#: ordinary text tokenizes into real pieces) or "numbered" (`▁t0`, `▁t1` ...: any size).
Vocab = Literal["chars", "numbered"]


def llama_vocab(size: int, style: Vocab) -> tuple[list[str], list[float], list[int]]:
    """SentencePiece-style pieces: <unk> <s> </s>, the 256 byte-fallback tokens, then `style`'s pieces."""
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [_UNKNOWN, _CONTROL, _CONTROL] + [_BYTE] * 256
    if style == "chars":
        chars = string.ascii_lowercase + string.ascii_uppercase + string.digits + ".,!?"
        pieces = ["▁", *chars, *(f"▁{c}" for c in chars)]
        pieces += [a + b for a in string.ascii_lowercase for b in string.ascii_lowercase]
        tokens += pieces[: size - len(tokens)]
    else:
        tokens += [f"\u2581t{i}" for i in range(size - len(tokens))]
    types += [_NORMAL] * (len(tokens) - len(types))
    if len(tokens) != size:
        raise ValueError(f"vocabulary of {len(tokens)} pieces, config says {size}")
    scores = [0.0] * 259 + [-float(i) for i in range(size - 259)]
    return tokens, scores, types


def write_llama_gguf(path: Path, config: Mapping[str, Any], *, name: str, matrix_type: MatrixType,
                     vocab: Vocab, chat_template: str | None = None, seed: int = 0) -> Path:
    """Write a llama GGUF of `config`'s shapes to `path` (random matrices of `matrix_type`, F32 norms of ones).

    `chat_template` (and the add-BOS flag with it) is what llama-server's chat endpoint needs; None writes
    neither, as convert_hf_to_gguf does for a checkpoint without one. The random stream differs by type (Q8_0
    draws float64 normals and quantizes; F16 draws float32 normals) and is fixed by `seed`."""
    import gguf  # the e2e extra: imported here so that importing this module needs nothing
    import numpy as np

    c = config
    n_embd, n_ff, n_layer = int(c["hidden_size"]), int(c["intermediate_size"]), int(c["num_hidden_layers"])
    n_head, n_kv, n_vocab = int(c["num_attention_heads"]), int(c["num_key_value_heads"]), int(c["vocab_size"])
    head_dim = n_embd // n_head
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name(name)
    w.add_context_length(int(c["max_position_embeddings"]))
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_kv)
    w.add_rope_dimension_count(head_dim)
    w.add_rope_freq_base(float(c["rope_theta"]))
    w.add_layer_norm_rms_eps(float(c["rms_norm_eps"]))
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0 if matrix_type == "q8_0" else gguf.LlamaFileType.MOSTLY_F16)
    tokens, scores, types = llama_vocab(n_vocab, vocab)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    if chat_template is not None:
        w.add_add_bos_token(True)
        w.add_chat_template(chat_template)

    def matrix(tensor: str, rows: int, cols: int) -> None:
        if matrix_type == "q8_0":
            data = (rng.standard_normal((rows, cols)) * 0.02).astype(np.float32)
            q = gguf.quants.quantize(data, gguf.GGMLQuantizationType.Q8_0)
            w.add_tensor(tensor, q, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            w.add_tensor(tensor, (rng.standard_normal((rows, cols), dtype=np.float32) * 0.02).astype(np.float16))

    def norm(tensor: str) -> None:
        w.add_tensor(tensor, np.ones(n_embd, dtype=np.float32))

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


__all__ = ["MatrixType", "Vocab", "llama_vocab", "write_llama_gguf"]
