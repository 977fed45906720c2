"""`infragen estimate`: memory, latency and throughput of one model on one machine (what-if questions).

Parses options, resolves names through the catalog and model registry, prints the result. No modelling here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from infragen.errors import InputError
from infragen.sizing.types import Estimate, Hardware


def estimate_document(est: Estimate, hardware: Hardware, model_id: str) -> dict[str, Any]:
    """The JSON document of an estimate (keys promised in docs/performance-model.md)."""
    return {
        "fits": est.fits,
        "reason": est.reason,
        "model": model_id,
        "hardware": {
            "name": hardware.name,
            "gpu": hardware.accelerator.id if hardware.accelerator else None,
            "gpu_count": hardware.gpu_count,
            "gpu_memory_gib": hardware.memory_per_gpu_gib if hardware.accelerator else None,
            "cpu": hardware.cpu.id if hardware.cpu else None,
        },
        "engine": est.engine,
        "precision": est.precision,
        "kv_cache_dtype": est.kv_cache_dtype,
        "parallelism": {"tp": est.tp, "pp": est.pp, "nodes": est.nodes, "expert_parallel": est.expert_parallel},
        "concurrency": est.concurrency,
        "memory": {
            "weights_gib_per_gpu": round(est.weights_gib_per_gpu, 3),
            "kv_cache_bytes_per_token": est.kv_cache_bytes_per_token,
            "kv_cache_gib_per_gpu": round(est.kv_cache_gib_per_gpu, 3),
            "kv_cache_capacity_tokens": est.kv_cache_capacity_tokens,
            "overhead_gib_per_gpu": round(est.overhead_gib_per_gpu, 3),
            "max_concurrency": est.max_concurrency,
            "max_model_len": est.max_model_len,
        },
        "latency": {"ttft_ms": round(est.ttft_ms, 2), "tpot_ms": round(est.tpot_ms, 3), "e2e_ms": round(est.e2e_ms, 1)},
        "throughput": {
            "output_tokens_per_s": round(est.output_tokens_per_s, 1),
            "requests_per_s": round(est.requests_per_s, 3),
        },
        "uncertainty": {"relative": est.relative_uncertainty},
        "regime": est.regime,
        "notes": list(est.notes),
    }


def render_table(doc: dict[str, Any]) -> str:
    """Human-readable summary of an estimate document."""
    hw = doc["hardware"]
    par = doc["parallelism"]
    lines = [
        f"model {doc['model']} ({doc['precision']}, kv {doc['kv_cache_dtype']}) on {hw['name']} with {doc['engine']}"
        f", tp={par['tp']}{' (expert parallel)' if par.get('expert_parallel') else ''} pp={par['pp']}"
        f" nodes={par['nodes']}",
    ]
    if not doc["fits"]:
        lines.append(f"does not fit: {doc['reason']}")
        return "\n".join(lines)
    mem, lat, thr = doc["memory"], doc["latency"], doc["throughput"]
    band = doc["uncertainty"]["relative"]
    where = "per GPU" if hw["gpu"] else "in RAM "
    lines += [
        f"  weights {where}        {mem['weights_gib_per_gpu']:.2f} GiB",
        f"  overhead {where}       {mem['overhead_gib_per_gpu']:.2f} GiB",
        f"  KV cache {where}       {mem['kv_cache_gib_per_gpu']:.2f} GiB"
        f" ({mem['kv_cache_capacity_tokens']} tokens, {mem['kv_cache_bytes_per_token']} bytes/token)",
        f"  max_model_len          {mem['max_model_len']}",
        f"  max concurrency        {mem['max_concurrency']}",
        f"  concurrency modelled   {doc['concurrency']}",
        f"  TTFT                   {lat['ttft_ms']:.1f} ms",
        f"  TPOT                   {lat['tpot_ms']:.2f} ms",
        f"  end-to-end             {lat['e2e_ms']:.0f} ms",
        f"  output tokens/s        {thr['output_tokens_per_s']:.0f} (whole replica)",
        f"  requests/s             {thr['requests_per_s']:.2f}",
        f"  uncertainty            +/-{band:.0%} ({doc['regime']})",
    ]
    lines += [f"  note: {n}" for n in doc["notes"]]
    return "\n".join(lines)


def resolve_hardware(gpu: str | None, gpus: int | None, instance: str | None,
                     hardware_file: Path | None) -> Hardware:
    """The machine named by exactly one of --gpu/--gpus, --instance or --hardware (InputError otherwise)."""
    chosen = [name for name, value in (("--gpu", gpu), ("--instance", instance), ("--hardware", hardware_file))
              if value is not None]
    if len(chosen) != 1:
        raise InputError("give exactly one of --gpu NAME --gpus N, --instance TYPE or --hardware FILE.yaml"
                         + (f" (got {', '.join(chosen)})" if chosen else ""))
    if gpus is not None and gpu is None:
        raise InputError("--gpus goes with --gpu")
    from infragen.catalog import load_catalog
    from infragen.sizing.hardware import hardware_from_gpu, hardware_from_instance, load_hardware_file

    catalog = load_catalog()
    if gpu is not None:
        return hardware_from_gpu(catalog.accelerator(gpu), gpus if gpus is not None else 1)
    if instance is not None:
        return hardware_from_instance(catalog.instance(instance), catalog)
    assert hardware_file is not None
    return load_hardware_file(hardware_file, catalog)


def _concurrency(value: str) -> int | None:
    if value == "max":
        return None
    try:
        number = int(value)
    except ValueError:
        raise InputError(f"--concurrency must be a whole number or 'max' (got {value!r})") from None
    if number < 1:
        raise InputError(f"--concurrency must be at least 1 (got {number})")
    return number


@click.command(
    epilog="`fits: false` is an answer, not an error: the command exits 0 and says why. "
    "Bad options exit 2."
)
@click.option("--model", "model_name", required=True, help="Registry name or path to a Hugging Face config.json.")
@click.option("--precision", required=True, help="bf16, fp16, fp8, int8, int4-awq, int4-gptq, or GGUF q4_k_m, q4_0...")
@click.option("--kv-cache-dtype", default="auto", show_default=True, help="auto or fp8 (vLLM).")
@click.option("--gpu", help="GPU name from the catalog (with --gpus).")
@click.option("--gpus", type=int, help="How many GPUs of --gpu in the node.")
@click.option("--instance", help="Catalog instance type (p5.48xlarge, ecs.gn7i-c8g1.2xlarge...).")
@click.option("--hardware", "hardware_file", type=click.Path(path_type=Path), help="On-prem machine YAML.")
@click.option("--tp", type=click.IntRange(min=1), default=None, help="Tensor-parallel degree (default: all GPUs / pp).")
@click.option("--pp", type=click.IntRange(min=1), default=1, show_default=True, help="Pipeline-parallel degree.")
@click.option("--nodes", type=click.IntRange(min=1), default=1, show_default=True,
              help="Nodes the replica spans (pp across nodes).")
@click.option("--engine", type=click.Choice(["vllm", "llama.cpp"]), default=None,
              help="Serving engine (default: vllm with GPUs, llama.cpp without).")
@click.option("--input-len", type=int, required=True, help="Prompt tokens per request.")
@click.option("--output-len", type=int, required=True, help="Generated tokens per request.")
@click.option("--concurrency", "concurrency_text", default=None, help="Concurrent requests, or 'max' (closed loop).")
@click.option("--rate", "rate_per_s", type=float, default=None,
              help="Poisson arrivals, requests/s (open loop; instead of --concurrency, vLLM only).")
@click.option("--max-num-seqs", type=click.IntRange(min=1), default=None,
              help="With --rate: vLLM --max-num-seqs (default: vLLM 0.34's for the GPU); llama.cpp: "
                   "llama-server --parallel (default: the slots the RAM holds, at most 16).")
@click.option("--max-num-batched-tokens", type=click.IntRange(min=1), default=None,
              help="With --rate: vLLM --max-num-batched-tokens (default: vLLM 0.34's for the GPU); "
                   "llama.cpp: llama-server --batch-size (default 2048).")
@click.option("--max-model-len", type=click.IntRange(min=1), default=None,
              help="vLLM --max-model-len to check (default: largest).")
@click.option("--gpu-memory-utilization", type=float, default=0.9, show_default=True)
@click.option("--calibration", "calibration_file", type=click.Path(path_type=Path), default=None,
              help="Calibration profile from `infragen calibrate` (same hardware and engine).")
@click.option("--prefix-cache-hit-rate", type=float, default=0.0, show_default=True,
              help="Share of prompt tokens already in vLLM's prefix cache (0-1): prefill computes only the rest.")
@click.option("--expert-parallel", is_flag=True, default=False,
              help="MoE models, vLLM: serve with --enable-expert-parallel (each GPU of the tp group holds whole "
                   "experts instead of a slice of every expert).")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
def estimate(
    model_name: str,
    precision: str,
    kv_cache_dtype: str,
    gpu: str | None,
    gpus: int | None,
    instance: str | None,
    hardware_file: Path | None,
    tp: int | None,
    pp: int,
    nodes: int,
    engine: str | None,
    input_len: int,
    output_len: int,
    concurrency_text: str | None,
    rate_per_s: float | None,
    max_num_seqs: int | None,
    max_num_batched_tokens: int | None,
    max_model_len: int | None,
    gpu_memory_utilization: float,
    calibration_file: Path | None,
    prefix_cache_hit_rate: float,
    expert_parallel: bool,
    fmt: str,
) -> None:
    """Predict what vLLM or llama.cpp does with one model on one machine under one load."""
    if (concurrency_text is None) == (rate_per_s is None):
        raise InputError("give exactly one of --concurrency N|max (requests in flight) or --rate R (requests/s)")
    if rate_per_s is None and (max_num_seqs is not None or max_num_batched_tokens is not None):
        raise InputError("--max-num-seqs and --max-num-batched-tokens go with --rate")
    if rate_per_s is not None and not (0 < rate_per_s < float("inf")):
        raise InputError(f"--rate must be a positive number of requests/s (got {rate_per_s})")
    concurrency = _concurrency(concurrency_text) if concurrency_text is not None else None
    if max_model_len is not None and max_model_len < input_len + output_len:
        raise InputError(f"--max-model-len {max_model_len} is shorter than a request of {input_len} + {output_len} "
                         "tokens: the engine would refuse every request; give at least their sum, or leave it out")
    if not 0.0 <= prefix_cache_hit_rate <= 1.0:  # also nan
        raise InputError("--prefix-cache-hit-rate is a share of prompt tokens from 0 to 1 "
                         f"(got {prefix_cache_hit_rate:g})")
    if prefix_cache_hit_rate > 0 and rate_per_s is not None:
        raise InputError("--prefix-cache-hit-rate goes with --concurrency: the --rate load model prefills whole "
                         "prompts (the cache is not credited there yet)")
    from infragen.catalog.models import resolve_model
    from infragen.sizing.estimate import estimate as run_estimate

    hardware = resolve_hardware(gpu, gpus, instance, hardware_file)
    model = resolve_model(model_name, base_dir=Path.cwd(), where="--model")
    if engine is None:
        engine = "vllm" if hardware.accelerator is not None else "llama.cpp"
    if tp is None:
        tp = max(1, hardware.gpu_count * nodes // pp) if engine == "vllm" else 1
    calibrated: dict[str, float] = {"decode_factor": 1.0, "prefill_factor": 1.0}
    if calibration_file is not None:
        from infragen.cli.calibrate_cmd import calibration_kwargs

        calibrated = calibration_kwargs(calibration_file, hardware, engine, model, precision, tp, pp)
    if rate_per_s is not None:
        if expert_parallel:
            raise InputError("--expert-parallel goes with --concurrency: the --rate load model does not take it yet")
        from infragen.cli.rate_output import rate_estimate

        rate_estimate(model, hardware, rate_per_s, fmt, engine, precision=precision, kv_cache_dtype=kv_cache_dtype,
                      tp=tp, pp=pp, nodes=nodes, input_len=input_len, output_len=output_len,
                      max_model_len=max_model_len, gpu_memory_utilization=gpu_memory_utilization,
                      max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens, **calibrated)
        return
    result = run_estimate(
        model, hardware, precision=precision, kv_cache_dtype=kv_cache_dtype, engine=engine, tp=tp, pp=pp,
        nodes=nodes, input_len=input_len, output_len=output_len, concurrency=concurrency,
        max_model_len=max_model_len, gpu_memory_utilization=gpu_memory_utilization,
        prefix_cache_hit_rate=prefix_cache_hit_rate, expert_parallel=expert_parallel, **calibrated,
    )
    doc = estimate_document(result, hardware, model.id)
    if fmt == "json":
        click.echo(json.dumps(doc, indent=2))
    else:
        click.echo(render_table(doc))


__all__ = ["estimate", "estimate_document", "render_table", "resolve_hardware"]
