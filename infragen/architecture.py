"""The transformer shape that every memory and speed figure is computed from.

Shared by the workload spec (explicit architectures), the model registry and HF config import.
Pure data plus parameter arithmetic; no I/O.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from infragen.identifiers import ModelId, Text, shown

#: Largest figure an architecture field may hold (dimensions, counts, contexts); see _no_bool_numbers.
MAX_FIGURE = 10**9

AttentionKind = Literal["mha", "gqa", "mqa", "mla"]

#: Fields that name, source or bound a model without changing how fast a token is computed: left out of
#: ModelArchitecture.speed_shape (Llama-3-8B and Llama-3.1-8B differ only in context and rope, and share it).
_NOT_SPEED = frozenset({
    "id", "display_name", "max_position_embeddings", "original_max_position_embeddings", "yarn_factor",
    "rope_theta", "hf_repo", "published_params_b", "published_active_params_b", "published_params_source",
    "published_active_includes_embedding", "source", "aliases", "notes"})


class ModelArchitecture(BaseModel):
    """A decoder-only transformer, described the way Hugging Face `config.json` files describe it."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    id: ModelId = "custom"
    """Canonical registry id (`llama-3.1-8b`); `custom` for an explicit architecture."""
    display_name: Text = ""
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
    """Extra multi-token-prediction layers shipped in the checkpoint (DeepSeek-V3: 1); not served by default
    and not counted by `total_params()` (DeepSeek's published 671B excludes them; see `mtp_params()`)."""
    # Small per-layer details that make the parameter count exact
    qk_norm: bool = False
    """Per-head RMSNorm on queries and keys (Qwen3: `q_norm`/`k_norm`, head_dim weights each)."""
    sandwich_norm: bool = False
    """Extra norms after attention and after the MLP (Gemma-2: four norms per layer instead of two)."""
    router_score_bias: bool = False
    """The MoE router carries a per-expert score-correction bias (DeepSeek-V3 `e_score_correction_bias`)."""
    # Context extension
    original_max_position_embeddings: PositiveInt | None = None
    """Native context of the checkpoint when `max_position_embeddings` is reached only with YaRN rope scaling
    (Qwen2/2.5 model cards: 32768 native, 131072 with YaRN factor 4); None = no scaling needed."""
    yarn_factor: float | None = Field(default=None, gt=1)
    """YaRN rope-scaling factor the engine must enable to serve beyond `original_max_position_embeddings`
    (vLLM `--hf-overrides` rope_scaling); None = the checkpoint's config already covers its context."""
    rope_theta: float | None = Field(default=None, gt=0)
    """RoPE base (HF `rope_theta`); needed with `yarn_factor`, because vLLM's override of the rope parameters
    replaces them whole; None = not recorded (the checkpoint's own value is used)."""
    # Checkpoint
    weight_block_size: tuple[PositiveInt, PositiveInt] | None = None
    """`quantization_config.weight_block_size` [block_n, block_k] of the checkpoint this record describes when it
    holds block-quantized FP8 weights (DeepSeek-V3: [128, 128]); vLLM then serves it as fp8 only, and tensor
    parallelism must split it on block boundaries (compat.yaml tp_rules). None = not block-quantized."""
    # Provenance and sources
    hf_repo: str | None = None
    """Hugging Face repository of the reference (unquantized) checkpoint."""
    published_params_b: float | None = Field(default=None, gt=0)
    """Total parameters in billions as published by the model's authors."""
    published_active_params_b: float | None = Field(default=None, gt=0)
    """Active parameters per token in billions as published (MoE models)."""
    published_params_source: str | None = None
    """The publication `published_params_b` (and the active count) was read from."""
    published_active_includes_embedding: bool = True
    """Whether the published active count includes the input embedding (Mistral and Qwen count it;
    DeepSeek's 36.6B activated excludes it but includes the output head)."""
    source: str | None = None
    """Where the architecture figures were read."""

    aliases: tuple[str, ...] = ()
    """Other names that resolve to this entry (HF repo ids, spellings); matched case-insensitively."""
    notes: str = ""
    """Caveats for reviewers (which checkpoint, how the published count was rounded...)."""

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        # pydantic would read `hidden_size: true` as 1; a boolean is never a size.
        if isinstance(value, bool) and cls.model_fields[info.field_name or ""].annotation is not bool:
            raise ValueError(f"expected a number, found {value}")
        # Physical bounds: no real transformer dimension or count comes near 1e9, and none is infinite; bounding
        # them here is what keeps parameter and memory arithmetic from overflowing downstream.
        if isinstance(value, int | float) and not isinstance(value, bool) and not -MAX_FIGURE <= value <= MAX_FIGURE:
            raise ValueError(f"{shown(value)} is out of range (at most {MAX_FIGURE:.0e})")
        return value

    @model_validator(mode="after")
    def _consistent_shape(self) -> ModelArchitecture:
        def bad(field: str, message: str) -> PydanticCustomError:
            return PydanticCustomError("conflict", message, {"field": field})

        heads, kv = self.num_attention_heads, self.kv_heads
        if kv > heads or heads % kv:
            raise bad("num_kv_heads", f"{kv} must divide num_attention_heads ({heads})")
        if self.head_dim is None and not self.is_mla and self.hidden_size % heads:
            raise bad("head_dim", f"hidden_size {self.hidden_size} is not a multiple of {heads} heads; give head_dim")
        if self.num_experts and not 1 <= self.num_experts_per_token <= self.num_experts:
            raise bad("num_experts_per_token", f"must be between 1 and num_experts ({self.num_experts})")
        if not self.num_experts and (self.num_experts_per_token or self.num_shared_experts or self.first_dense_layers):
            raise bad("num_experts", "expert settings are given but num_experts is 0 (a dense model)")
        if self.first_dense_layers > self.num_layers:
            raise bad("first_dense_layers", f"{self.first_dense_layers} exceeds num_layers ({self.num_layers})")
        if self.sliding_window_layers is not None and self.sliding_window_layers > self.num_layers:
            raise bad("sliding_window_layers", f"exceeds num_layers ({self.num_layers})")
        if self.is_mla and None in (self.qk_rope_head_dim, self.qk_nope_head_dim, self.v_head_dim):
            raise bad("kv_lora_rank", "MLA needs qk_rope_head_dim, qk_nope_head_dim and v_head_dim too")
        if (self.original_max_position_embeddings is None) != (self.yarn_factor is None):
            raise bad("yarn_factor", "give yarn_factor and original_max_position_embeddings together")
        if self.yarn_factor is not None and self.rope_theta is None:
            raise bad("rope_theta", "give rope_theta with yarn_factor (the engine override carries it)")
        native = self.original_max_position_embeddings
        if native is not None and native >= self.max_position_embeddings:
            raise bad("original_max_position_embeddings", "must be below max_position_embeddings")
        return self

    def speed_shape(self) -> str:
        """16 hex digits naming the figures a speed estimate reads (widths, counts, experts, attention kind): two
        records with the same fingerprint run the same kernels at the same sizes. A calibration profile holds for
        that shape only (sizing/calibration.py), whatever the record is called: names, sources, context limits
        and rope settings are left out."""
        speed = self.model_dump(mode="json", exclude=_NOT_SPEED)
        return hashlib.sha256(json.dumps(speed, sort_keys=True).encode()).hexdigest()[:16]

    # ------------------------------------------------------------------ derived shape
    @property
    def kv_heads(self) -> int:
        """Key/value heads (equal to the query heads for MHA)."""
        return self.num_kv_heads or self.num_attention_heads

    @property
    def head_dim_resolved(self) -> int:
        """Per-head width: `head_dim`, else hidden_size / num_attention_heads."""
        return self.head_dim or self.hidden_size // self.num_attention_heads

    @property
    def is_moe(self) -> bool:
        """True when the MLP of (most) layers is a mixture of experts."""
        return self.num_experts > 0

    @property
    def is_mla(self) -> bool:
        """True for multi-head latent attention (DeepSeek-V2/V3)."""
        return self.kv_lora_rank is not None

    @property
    def attention_kind(self) -> AttentionKind:
        """mla, mha (kv heads = query heads), mqa (one kv head) or gqa."""
        if self.is_mla:
            return "mla"
        if self.kv_heads == self.num_attention_heads:
            return "mha"
        return "mqa" if self.kv_heads == 1 else "gqa"

    @property
    def moe_layers(self) -> int:
        """Layers whose MLP is a mixture of experts."""
        return self.num_layers - self.first_dense_layers if self.is_moe else 0

    @property
    def dense_layers(self) -> int:
        """Layers with a dense MLP."""
        return self.num_layers - self.moe_layers

    # ------------------------------------------------------------------ parameter counts
    def embedding_params(self) -> int:
        """Input embedding matrix (vocab x hidden)."""
        return self.vocab_size * self.hidden_size

    def lm_head_params(self) -> int:
        """Output projection; 0 when tied to the embedding (stored once)."""
        return 0 if self.tie_word_embeddings else self.vocab_size * self.hidden_size

    def attention_params_per_layer(self) -> int:
        """Attention projections, biases and attention-internal norms of one layer."""
        h, nh = self.hidden_size, self.num_attention_heads
        if self.is_mla:
            rank = self.kv_lora_rank or 0
            rope = self.qk_rope_head_dim or 0
            nope = self.qk_nope_head_dim or self.head_dim_resolved
            v_dim = self.v_head_dim or self.head_dim_resolved
            q_out = nh * (nope + rope)
            # q_a_proj + q_a_layernorm + q_b_proj, or one full-rank q_proj
            q = h * self.q_lora_rank + self.q_lora_rank + self.q_lora_rank * q_out if self.q_lora_rank else h * q_out
            kv = h * (rank + rope) + rank + rank * nh * (nope + v_dim)  # kv_a_proj_with_mqa, kv_a_layernorm, kv_b
            return q + kv + nh * v_dim * h  # + o_proj
        hd, nkv = self.head_dim_resolved, self.kv_heads
        params = 2 * h * nh * hd + 2 * h * nkv * hd  # q, o and k, v
        if self.attention_bias:
            params += nh * hd + 2 * nkv * hd  # q/k/v biases (o_proj has none)
        if self.qk_norm:
            params += 2 * hd
        return params

    def norm_params_per_layer(self) -> int:
        """Layer norms around attention and MLP (RMSNorm: one weight vector each)."""
        return (4 if self.sandwich_norm else 2) * self.hidden_size

    def mlp_params(self, inner_size: int) -> int:
        """One MLP (or one expert) of the given inner width."""
        return (3 if self.mlp_gated else 2) * self.hidden_size * inner_size

    def expert_params(self) -> int:
        """One routed expert."""
        return self.mlp_params(self.moe_intermediate_size or self.intermediate_size)

    def router_params_per_layer(self) -> int:
        """Router (gate) of one MoE layer, with its score-correction bias if any."""
        return self.hidden_size * self.num_experts + (self.num_experts if self.router_score_bias else 0)

    def _layers_params(self, *, routed_experts: int) -> int:
        common = self.num_layers * (self.attention_params_per_layer() + self.norm_params_per_layer())
        dense = self.dense_layers * self.mlp_params(self.intermediate_size)
        moe = self.moe_layers * (
            (routed_experts + self.num_shared_experts) * self.expert_params() + self.router_params_per_layer()
        )
        return common + dense + moe

    def total_params(self) -> int:
        """Every weight of the served model: embeddings, lm_head (once if tied), layers, final norm.

        Multi-token-prediction layers are excluded (see `mtp_params()`).
        """
        return (
            self.embedding_params()
            + self.lm_head_params()
            + self._layers_params(routed_experts=self.num_experts)
            + self.hidden_size
        )

    def active_params(self, *, include_embedding: bool = True) -> int:
        """Weights one token touches: dense parts, shared experts and its top-k routed experts.

        Equals `total_params()` for a dense model. `include_embedding=False` drops the input embedding
        (a lookup, not a matmul), the convention of DeepSeek's published activated count; a tied
        lm_head is then still counted, since the output projection is a matmul.
        """
        routed = self.num_experts_per_token if self.is_moe else 0
        head = self.lm_head_params() if not self.tie_word_embeddings else self.embedding_params()
        embed = self.embedding_params() if include_embedding and not self.tie_word_embeddings else 0
        return embed + head + self._layers_params(routed_experts=routed) + self.hidden_size

    def mtp_params(self) -> int:
        """Unique weights of the multi-token-prediction modules in the checkpoint (DeepSeek-V3).

        Each module is one more decoder layer (MoE, like the last layer) plus enorm, hnorm, the
        2h -> h `eh_proj` and the shared head's norm; its embedding and output head share the main
        model's. DeepSeek states 11.5B unique parameters for V3's one module.
        """
        if self.num_nextn_predict_layers == 0:
            return 0
        h = self.hidden_size
        layer = self.attention_params_per_layer() + self.norm_params_per_layer()
        if self.is_moe:
            layer += (self.num_experts + self.num_shared_experts) * self.expert_params()
            layer += self.router_params_per_layer()
        else:
            layer += self.mlp_params(self.intermediate_size)
        return self.num_nextn_predict_layers * (layer + 2 * h + 2 * h * h + h)
