"""`infragen estimate --rate`: one vLLM replica or llama-server under Poisson arrivals, as a table or JSON (exit 3
past capacity).

Runs sizing/load_estimate.py and presents it; no modelling here.
"""

from __future__ import annotations

import json
from typing import Any

import click

from infragen.architecture import ModelArchitecture
from infragen.cli.estimate_cmd import estimate_document
from infragen.errors import InfeasibleError
from infragen.sizing.load_estimate import LoadModel, band_for, prepare_llama_cpp_load, prepare_load
from infragen.sizing.types import Hardware


def rate_document(load: LoadModel, hardware: Hardware, model_id: str, rate_per_s: float) -> dict[str, Any]:
    """The estimate document with a `load` section; latency/throughput are those at the rate."""
    point = load.at(rate_per_s)
    doc = estimate_document(load.base, hardware, model_id)
    capacity = load.capacity_per_s()
    doc["concurrency"] = None
    doc["load"] = {
        "rate_per_s": rate_per_s,
        "stable": point.stable,
        "capacity_per_s": round(capacity, 3),
        "scheduler": {"max_num_seqs": load.scheduler.slots, "max_num_batched_tokens":
                      load.scheduler.max_num_batched_tokens, "source": load.scheduler_source},
    }
    if not point.stable:
        return doc
    regime, band = band_for(load, point)
    doc["load"].update({
        "running_batch": round(point.running_batch, 2),
        "utilisation": round(point.utilisation, 3),
        "slot_utilisation": round(point.slot_utilisation, 3),
        "prefill_utilisation": round(point.prefill_utilisation, 3),
        "prefill_tokens_per_step": round(point.prefill_tokens_per_step, 1),
        "slot_wait_probability": round(point.slot_wait_probability, 4),
        "ttft_ms": {"mean": round(point.ttft_mean_s * 1e3, 2), "p50": round(point.ttft_p50_s * 1e3, 2),
                    "p90": round(point.ttft_p90_s * 1e3, 2), "p99": round(point.ttft_p99_s * 1e3, 2)},
        "e2e_ms": {"mean": round(point.e2e_mean_s * 1e3, 1), "p99": round(point.e2e_p99_s * 1e3, 1)},
    })
    doc["latency"] = {"ttft_ms": round(point.ttft_p50_s * 1e3, 2), "tpot_ms": round(point.tpot_s * 1e3, 3),
                      "e2e_ms": round(point.e2e_mean_s * 1e3, 1)}
    doc["throughput"] = {"output_tokens_per_s": round(rate_per_s * load.output_len, 1),
                         "requests_per_s": rate_per_s}
    doc["uncertainty"] = {"relative": band}
    doc["regime"] = regime
    return doc


def render_rate_table(doc: dict[str, Any]) -> str:
    hw, par, ld = doc["hardware"], doc["parallelism"], doc["load"]
    mem = doc["memory"]
    sched = ld["scheduler"]
    where = "per GPU" if doc["engine"] == "vllm" else "in RAM"
    lines = [
        f"model {doc['model']} ({doc['precision']}, kv {doc['kv_cache_dtype']}) on {hw['name']} with {doc['engine']}"
        f", tp={par['tp']} pp={par['pp']} nodes={par['nodes']}",
        f"  weights {where:<15}{mem['weights_gib_per_gpu']:.2f} GiB",
        f"  KV cache {where:<14}{mem['kv_cache_gib_per_gpu']:.2f} GiB ({mem['kv_cache_capacity_tokens']} tokens)",
        (f"  scheduler              max_num_seqs {sched['max_num_seqs']}, max_num_batched_tokens "
         f"{sched['max_num_batched_tokens']} ({sched['source']})" if doc["engine"] == "vllm" else
         f"  scheduler              {sched['max_num_seqs']} slots (--parallel), --batch-size "
         f"{sched['max_num_batched_tokens']} ({sched['source']})"),
        f"  arrival rate           {ld['rate_per_s']:g} requests/s (Poisson)",
        f"  capacity               {ld['capacity_per_s']:.2f} requests/s",
    ]
    if not ld["stable"]:
        return "\n".join(lines)
    lat, ttft, e2e = doc["latency"], ld["ttft_ms"], ld["e2e_ms"]
    lines += [
        f"  running batch          {ld['running_batch']:.1f} (utilisation {ld['utilisation']:.0%}: slots "
        f"{ld['slot_utilisation']:.0%}, prompt steps {ld['prefill_utilisation']:.0%})",
        f"  prompt tokens / step   {ld['prefill_tokens_per_step']:.0f} (chunked prefill mixed into decode steps)",
        f"  TTFT p50 / p90 / p99   {ttft['p50']:.0f} / {ttft['p90']:.0f} / {ttft['p99']:.0f} ms "
        f"(mean {ttft['mean']:.0f})",
        f"  TPOT                   {lat['tpot_ms']:.2f} ms",
        f"  end-to-end mean / p99  {e2e['mean']:.0f} / {e2e['p99']:.0f} ms",
        f"  output tokens/s        {doc['throughput']['output_tokens_per_s']:.0f}",
        f"  uncertainty            +/-{doc['uncertainty']['relative']:.0%} ({doc['regime']})",
    ]
    lines += [f"  note: {n}" for n in doc["notes"]]
    return "\n".join(lines)


def rate_estimate(model: ModelArchitecture, hardware: Hardware, rate_per_s: float, fmt: str, engine: str = "vllm",
                  **kw: Any) -> None:
    """Print the estimate at `rate_per_s`; InfeasibleError (exit 3) when the rate exceeds the capacity.

    llama.cpp: max_num_seqs is llama-server's --parallel, max_num_batched_tokens its --batch-size.
    """
    if engine == "llama.cpp":
        load = prepare_llama_cpp_load(model, hardware, precision=kw["precision"], input_len=kw["input_len"],
                                      output_len=kw["output_len"], max_model_len=kw["max_model_len"],
                                      parallel=kw["max_num_seqs"], batch_size=kw["max_num_batched_tokens"],
                                      decode_factor=kw["decode_factor"], prefill_factor=kw["prefill_factor"])
    else:
        load = prepare_load(model, hardware, **kw)
    if not isinstance(load, LoadModel):
        doc = estimate_document(load, hardware, model.id)
        from infragen.cli.estimate_cmd import render_table

        click.echo(json.dumps(doc, indent=2) if fmt == "json" else render_table(doc))
        return
    doc = rate_document(load, hardware, model.id, rate_per_s)
    if not doc["load"]["stable"]:
        cap = doc["load"]["capacity_per_s"]
        raise InfeasibleError(
            f"{rate_per_s:g} requests/s exceed the capacity of one replica ({cap:.2f} requests/s of {kw['input_len']}"
            f" + {kw['output_len']} tokens on {hardware.name}): the queue grows without bound",
            fix=f"send at most {cap:.2f} requests/s per replica (fewer for latency: see --rate {0.8 * cap:.2f}), "
                "or spread the rate over more replicas",
        )
    click.echo(json.dumps(doc, indent=2) if fmt == "json" else render_rate_table(doc))
