"""The context a plan serves (vLLM `--max-model-len`): the workload's `traffic.max_context_tokens` when given, else
the model's trained context capped by what the KV cache holds at the chosen batch: one request of that length next
to `max_num_seqs - 1` average ones (vLLM's KV cache is one paged pool, so a long request only needs room beside the
others; several long ones at once are preempted and resumed, never refused).

Pure: takes the model, the KV capacity and the batch the search found, and a memory re-check for models whose
profiled activations grow with the context (sliding-window models run without chunked prefill).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from infragen.architecture import ModelArchitecture
from infragen.sizing.memory import largest_model_len
from infragen.spec import WorkloadSpec


@dataclass(frozen=True)
class ContextChoice:
    """The served context and the sentence that explains it."""

    max_model_len: int
    why: str


def trained_context(model: ModelArchitecture) -> int:
    """The context the checkpoint serves without switching on rope scaling (YaRN only when asked for)."""
    return model.original_max_position_embeddings or model.max_position_embeddings


def search_model_len(spec: WorkloadSpec, model: ModelArchitecture, engine: str) -> int:
    """The context the search checks each layout against: the workload's, else the least a request of the workload
    needs (vLLM: prompt + output; the plan then raises it to what memory holds), or for llama.cpp, which allocates
    every slot's context up front, 4 x (prompt + output); both capped by the model's context."""
    t = spec.traffic
    if t.max_context_tokens is not None:
        return t.max_context_tokens
    need = t.prompt_tokens + t.output_tokens
    return min(4 * need if engine == "llama.cpp" else need, model.max_position_embeddings)


def select_model_len(spec: WorkloadSpec, model: ModelArchitecture, *, engine: str, capacity_tokens: int, batch: int,
                     capacity_at: Callable[[int], int | None]) -> ContextChoice:
    """The plan's context and why. `capacity_at(length)`: the KV capacity (tokens) with `--max-model-len length`,
    None when it does not fit (a memory re-check; only sliding-window models change it)."""
    name = model.display_name or model.id
    t = spec.traffic
    floor = search_model_len(spec, model, engine)
    if t.max_context_tokens is not None:
        return ContextChoice(floor, f"max_model_len {floor:,}: traffic.max_context_tokens.")
    if engine == "llama.cpp":
        return ContextChoice(floor, f"context {floor:,} tokens per slot: 4 x (prompt + output); llama.cpp allocates "
                                    "every slot's context in RAM up front, so it is not raised to the model's "
                                    "trained context (set traffic.max_context_tokens for longer requests).")
    trained = trained_context(model)
    average = t.prompt_tokens + t.output_tokens
    others = max(batch, 1) - 1

    def longest(capacity: int) -> int:
        return min(trained, largest_model_len(model, capacity - others * average))

    length, capacity = floor, capacity_tokens
    candidate = longest(capacity)
    while candidate > floor:
        checked = capacity_at(candidate)  # sliding-window models profile max_model_len tokens: re-check the memory
        if checked is not None and longest(checked) >= candidate:
            length, capacity = candidate, checked
            break
        candidate = max(floor, candidate // 2)
    beside = f"next to {others} others of {average:,} (max_num_seqs {batch})" if others else "(max_num_seqs 1)"
    if length >= trained:
        why = (f"max_model_len {length:,}: {name}'s trained context; the KV cache ({capacity:,} tokens) holds a "
               f"request of that length {beside}.")
    else:
        why = (f"max_model_len {length:,}, below {name}'s trained context of {trained:,}: the KV cache holds "
               f"{capacity:,} tokens, a request of {length:,} {beside}; longer requests need "
               "traffic.max_context_tokens and a larger GPU or fewer sequences per replica.")
    return ContextChoice(length, why)
