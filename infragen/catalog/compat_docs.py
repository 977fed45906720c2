"""docs/compat-rules.md, generated from compat.yaml and the pinned releases: the table the planner obeys.

Regenerate with `python -m infragen.catalog.compat_docs > docs/compat-rules.md`; a test keeps the file current.
"""

from __future__ import annotations

from infragen.catalog.compat import TpRule, load_compat
from infragen.catalog.engines import pinned_release

REGENERATE = "python -m infragen.catalog.compat_docs > docs/compat-rules.md"

_WIDTHS = {
    "attention_heads": "query heads",
    "kv_heads": "KV heads (none for MLA: one latent)",
    "vocab_padded": "vocabulary padded to a multiple of 64",
    "dense_mlp": "intermediate_size, when some layers have a dense MLP",
    "experts": "moe_intermediate_size of one routed expert (intermediate_size for Mixtral)",
    "shared_experts": "moe_intermediate_size x shared experts (DeepSeek)",
    "attention_output": "heads x head_dim (v_head_dim for MLA): the o_proj input",
}


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _shard(rule: TpRule) -> str:
    if rule.multiple_of == "one":
        text = "tp divides it" + (" (or tp is a multiple of it: replicated)" if rule.replicate else "")
    else:
        blocks = "weight_block_size[1]" if rule.multiple_of == "block_k" else "weight_block_size[0] and [1]"
        text = f"at tp > 1, width / tp is a multiple of {blocks}"
        if rule.refine_min is not None:
            text += (f", else gcd(block_n, block_k, shard, hidden_size) >= {rule.refine_min} on compute capability "
                     f"{rule.refine_min_compute_capability}+ (refined scales)")
    return text


def render_compat_rules() -> str:
    """The whole page, as markdown."""
    table = load_compat()
    vllm, llama = pinned_release("vllm"), pinned_release("llama.cpp")
    out = [
        "# Compatibility rules",
        "",
        f"<!-- generated from infragen/catalog/data/compat.yaml: {REGENERATE} -->",
        f"Generated from `infragen/catalog/data/compat.yaml` (as of {table.as_of}) and the pinned releases (vLLM "
        f"{vllm.version}, llama.cpp {llama.version}); do not edit by hand: `{REGENERATE}`. The planner, `estimate`"
        " and `render` obey every row; a rejected candidate names its rule (docs/engines.md).",
        "",
        "## Kernels by compute capability",
        "",
        "| kind | format | NVIDIA from | AMD targets | source |",
        "|---|---|---|---|---|",
    ]
    for k in table.kernels:
        out.append(f"| {k.kind} | {k.format} | {k.min_compute_capability} | {', '.join(k.amd_targets) or 'none'} | "
                   f"{_cell(k.source)} |")
    out += ["", "## `--quantization` per checkpoint", "",
            "A 16-bit checkpoint (the registry's reference repo, or `weights` when `precision` also lists bf16/fp16) "
            "served as fp8 is quantized at load; a quantized checkpoint (AWQ/GPTQ/INT8, block-FP8 reference repos, "
            "`weights` when fp8 is listed without a 16-bit format) gets no flag: its `quantization_config` decides.",
            "", "| precision | checkpoint | `--quantization` | source |", "|---|---|---|---|"]
    for q in table.quantization_flags:
        flag = f"`{q.flag}`" if q.flag else "none"
        out.append(f"| {q.precision} | {q.checkpoint.replace('_', '-')} | {flag} | {_cell(q.source)} |")
    out += ["", "## Model types", "",
            f"| model_type | architecture | vLLM {vllm.version} | llama.cpp {llama.version} | first vLLM | source |",
            "|---|---|---|---|---|---|"]
    for m in table.model_types:
        serves = ["yes" if m.hf_architecture in r.architectures else "**no**" for r in (vllm, llama)]
        out.append(f"| `{m.model_type}` | `{m.hf_architecture}` | {serves[0]} | {serves[1]} | "
                   f"{m.first_vllm or 'not recorded'} | {_cell(m.source)} |")
    out += ["", "## Tensor parallelism", "",
            "Block rules apply only when a block-quantized FP8 checkpoint (`weight_block_size` on the model record, "
            "read from `quantization_config`) is served as fp8.", "",
            "| rule | width | applies | the shard must be | source |", "|---|---|---|---|---|"]
    for r in table.tp_rules:
        applies = "always" if r.applies == "always" else "block-FP8 checkpoint"
        out.append(f"| `{r.id}` | {_WIDTHS[r.width]} | {applies} | {_shard(r)} | {_cell(r.source)} |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    print(render_compat_rules(), end="")
