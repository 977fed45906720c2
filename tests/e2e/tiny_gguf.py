"""The end-to-end boot's tiny llama-architecture GGUF (benchmarks/llama_gguf.py writes it): a few MB, two layers,
Q8_0 matrices, a 512-token SentencePiece vocabulary with byte fallback (so any text tokenizes) and a ChatML
template, so llama-server loads it and /v1/chat/completions works. The same architecture is the workload's
config.json, so the plan sizes the file it serves.
"""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.llama_gguf import write_llama_gguf

#: The workload's `model:` (a Hugging Face config.json); the file is written to match it.
CONFIG: dict[str, object] = json.loads((Path(__file__).parent / "fixtures" / "config.json").read_text())
CHATML = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
          "'<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


def write_tiny_gguf(path: Path, *, seed: int = 0) -> Path:
    """Write the model to `path` (Q8_0 matrices, F32 norms) and return it."""
    return write_llama_gguf(path, CONFIG, name="infragen-e2e-tiny", matrix_type="q8_0", vocab="chars",
                            chat_template=CHATML, seed=seed)
