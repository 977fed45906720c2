"""The one GGUF writer (benchmarks/llama_gguf.py) writes, byte for byte, what its two former copies wrote: the
e2e model (tests/e2e/tiny_gguf.py) and the benchmark's F16 file (on a small config: the real one is 2.2 GB).
The digests were measured with the copies on main before they were merged (gguf 0.19.0). Needs the e2e extra."""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path

import pytest

from tests.e2e.conftest import need

pytestmark = pytest.mark.e2e

SMALL = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
         "num_key_value_heads": 2, "vocab_size": 400, "max_position_embeddings": 256, "rope_theta": 10000.0,
         "rms_norm_eps": 1e-5}


def _md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


@pytest.fixture(autouse=True)
def _gguf() -> None:
    need(importlib.util.find_spec("gguf") is not None, "gguf is not installed (pip install -e '.[e2e]'; .ci/run does)")


def test_the_e2e_model_is_unchanged(tmp_path: Path) -> None:
    from tests.e2e.tiny_gguf import write_tiny_gguf

    assert _md5(write_tiny_gguf(tmp_path / "tiny.gguf", seed=0)) == "29a09e1db915cf95675271ab50ac58ae"
    assert _md5(write_tiny_gguf(tmp_path / "other.gguf", seed=1)) != "29a09e1db915cf95675271ab50ac58ae"


def test_the_benchmark_f16_writer_is_unchanged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks import llama_bench_cpu

    monkeypatch.setattr(llama_bench_cpu, "CONFIG", SMALL)
    assert _md5(llama_bench_cpu.write_f16(tmp_path / "f16.gguf")) == "33fec017f9f8c6847b34d30fc36a1c3c"
