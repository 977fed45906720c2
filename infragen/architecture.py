"""The transformer shape that every memory and speed figure is computed from.

Shared by the workload spec (explicit architectures), the model registry and HF config import.
Pure data plus parameter arithmetic; no I/O.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt

AttentionKind = Literal["mha", "gqa", "mqa", "mla"]


class ModelArchitecture(BaseModel):
    """A decoder-only transformer, described the way Hugging Face `config.json` files describe it."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    id: str = "custom"
    """Canonical registry id (`llama-3.1-8b`); `custom` for an explicit architecture."""
    display_name: str = ""
    """Name for humans (`Llama-3.1-8B`)."""
    family: str = "llama"
    """HF `model_type` (llama, qwen2, qwen3, qwen3_moe, mistral, mixtral, gemma, gemma2, phi3, deepseek_v3)."""
    hidden_size: PositiveInt
    """Model width d_model."""
    num_layers: PositiveInt
    """Decoder layers (HF `num_hidden_layers`)."""
    num_attention_heads: PositiveInt
    """Query heads."""
    num_kv_heads: PositiveInt | None = None
    """Key/value heads (GQA/MQA); None means equal to `num_attention_heads` (MHA)."""
    head_dim: PositiveInt | None = None
    """Per-head dimension; None means hidden_size / num_attention_heads."""
    intermediate_size: PositiveInt
    """Dense MLP inner width (for MoE models: the width of the dense layers, if any)."""
    vocab_size: PositiveInt
    """Tokenizer vocabulary (embedding rows)."""
    tie_word_embeddings: bool = False
    """True when lm_head shares the embedding matrix (counted once)."""
    attention_bias: bool = False
    """q/k/v projections carry biases (Qwen2)."""
    mlp_gated: bool = True
    """Gated MLP (SwiGLU/GeGLU: three matrices) rather than two."""
    max_position_embeddings: PositiveInt = 4096
    """Longest context the model was trained for (caps max_model_len)."""
    sliding_window: PositiveInt | None = None
    """Sliding-window attention span in tokens; None = full attention on every layer."""
    sliding_window_layers: int | None = Field(default=None, ge=0)
    """How many layers use the sliding window (None with a window = all layers; Gemma-2: half)."""
    # Mixture of experts
    num_experts: int = Field(default=0, ge=0)
    """Routed experts per MoE layer (0 = dense model)."""
    num_experts_per_token: int = Field(default=0, ge=0)
    """Experts each token is routed to (top-k)."""
    moe_intermediate_size: int | None = Field(default=None, ge=1)
    """Inner width of one routed expert; None = intermediate_size."""
    num_shared_experts: int = Field(default=0, ge=0)
    """Always-active shared experts per MoE layer (DeepSeek)."""
    first_dense_layers: int = Field(default=0, ge=0)
    """Leading layers with a dense MLP instead of experts (DeepSeek `first_k_dense_replace`)."""
    # Multi-head latent attention (DeepSeek-V2/V3)
    kv_lora_rank: int | None = Field(default=None, ge=1)
    """MLA compressed KV latent width; set only for MLA models."""
    q_lora_rank: int | None = Field(default=None, ge=1)
    """MLA query low-rank width (None = full-rank q projection)."""
    qk_rope_head_dim: int | None = Field(default=None, ge=1)
    """MLA decoupled RoPE key width (cached alongside the latent)."""
    qk_nope_head_dim: int | None = Field(default=None, ge=1)
    """MLA non-RoPE query/key head width."""
    v_head_dim: int | None = Field(default=None, ge=1)
    """MLA value head width."""
    num_nextn_predict_layers: int = Field(default=0, ge=0)
    """Extra multi-token-prediction layers shipped in the checkpoint (DeepSeek-V3: 1); not served by default."""
    # Provenance and sources
    hf_repo: str | None = None
    """Hugging Face repository of the reference (unquantized) checkpoint."""
    published_params_b: float | None = Field(default=None, gt=0)
    """Total parameters in billions as published by the model's authors."""
    published_active_params_b: float | None = Field(default=None, gt=0)
    """Active parameters per token in billions as published (MoE models)."""
    source: str | None = None
    """Where the architecture figures were read."""
