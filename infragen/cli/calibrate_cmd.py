"""`infragen calibrate RESULT...`: fit speed factors of one machine from its own benchmark results.

Reads `vllm bench serve --save-result` JSON and `llama-bench -o json` output, predicts each measured figure with
the model, fits the factors (sizing/calibration.py) and writes the profile YAML that `--calibration` reads.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import statistics
from pathlib import Path
from typing import Any

import click
import yaml

from infragen.architecture import ModelArchitecture
from infragen.errors import InputError
from infragen.sizing.calibration import (
    CalibrationInput,
    CalibrationProfile,
    Fit,
    Observation,
    Residual,
    cpu_of,
    fit_calibration,
    gpu_set,
    load_calibration,
    load_profile,
    median_abs_error,
    phased,
    physical_bounds,
    residuals,
    serving_ms,
    vllm_peak_fractions,
)
from infragen.sizing.types import Estimate, Hardware

#: Largest result file read: `vllm bench serve --save-detailed` keeps per-request token times (policy).
RESULT_FILE_BYTES = 64 * 1024 * 1024
#: llama-bench's model type suffix (`llama 1B Q4_0`) -> infragen's GGUF precision name.
_LLAMA_BENCH_TYPES = {"F16": "fp16", "BF16": "bf16", "Q8_0": "q8_0", "Q4_0": "q4_0", "Q4_K - Medium": "q4_k_m",
                      "Q5_K - Medium": "q5_k_m"}


def _kind(doc: Any) -> str | None:
    if isinstance(doc, dict) and isinstance(doc.get("results"), list):
        doc = doc["results"]  # a record of benchmarks/llama_bench_cpu.py (llama-bench's list inside)
    if isinstance(doc, list) and doc and all(isinstance(r, dict) and "avg_ts" in r and "n_gen" in r for r in doc):
        return "llama-bench"
    if isinstance(doc, dict) and "output_throughput" in doc and "completed" in doc:
        return "vllm-bench-serve"
    return None


def _number(doc: dict[str, Any], key: str, where: str) -> float:
    value = doc.get(key)
    number = float(value) if isinstance(value, float) or (isinstance(value, int) and not isinstance(value, bool)
                                                           and abs(value) < 2**1000) else math.nan
    if not 0 <= number < math.inf:
        raise InputError(f"{where}: {key}: expected a finite number >= 0 (got {_shown(value)})")
    return number


def _speed(doc: dict[str, Any], key: str, where: str) -> float:
    """A measured speed: a finite number > 0 (a run that served nothing measured no speed to calibrate on)."""
    value = _number(doc, key, where)
    if value <= 0:
        raise InputError(f"{where}: {key}: 0: the run served nothing, so it measured no speed; give a run that "
                         "completed requests")
    return value


def _shown(value: object) -> str:
    """A value as an error quotes it: short, whatever the file held."""
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


def _llama_bench_type(r: dict[str, Any], where: str, i: int) -> str:
    """infragen's GGUF precision name of a llama-bench row's `model_type` (`llama 1B Q4_0` -> q4_0); exit 2 else."""
    precision = _LLAMA_BENCH_TYPES.get(str(r.get("model_type", "")).split(" ", 2)[-1])
    if precision is None:
        raise InputError(f"{where}: [{i}].model_type: {r.get('model_type')!r} is not a type infragen models "
                         f"(one of {', '.join(_LLAMA_BENCH_TYPES)})")
    return precision


def _llama_bench(doc: Any, where: str, model: ModelArchitecture, hardware: Hardware) -> list[Observation]:
    from infragen.sizing.estimate import estimate

    rows = doc["results"] if isinstance(doc, dict) else doc
    out = []
    for i, r in enumerate(rows):
        precision = _llama_bench_type(r, where, i)
        n_prompt, n_gen = int(_number(r, "n_prompt", where)), int(_number(r, "n_gen", where))
        measured = _speed(r, "avg_ts", where)
        if n_gen <= 0 and n_prompt <= 0:
            continue

        def run(d: float, p: float, precision: str = precision, n_prompt: int = n_prompt,
                n_gen: int = n_gen) -> Estimate:  # a tgN test (after n_prompt tokens) or a ppN one (1 token out)
            return estimate(model, hardware, precision=precision, engine="llama.cpp", input_len=max(1, n_prompt),
                            output_len=max(1, n_gen), concurrency=1, decode_factor=d, prefill_factor=p)

        first = run(1.0, 1.0)
        if not first.fits:
            raise InputError(f"{where}: [{i}]: a test of {n_prompt} prompt + {n_gen} generated tokens: "
                             f"{first.reason}; check --model and the file")
        if n_gen > 0:
            def tg(d: float, p: float, run: Any = run) -> float:
                return 1e3 / run(d, p).tpot_ms

            out.append(Observation(f"{where}[{i}]", f"tg{n_gen}_{precision}_tokens_per_s", "decode", measured,
                                   1e3 / first.tpot_ms, model=tg))
        else:
            def pp(d: float, p: float, run: Any = run, n_prompt: int = n_prompt) -> float:
                return n_prompt / (run(d, p).ttft_ms / 1e3)

            out.append(Observation(f"{where}[{i}]", f"pp{n_prompt}_{precision}_tokens_per_s", "prefill", measured,
                                   n_prompt / (first.ttft_ms / 1e3), model=pp))
    return out


def _online_rate(doc: dict[str, Any], where: str) -> float | None:
    """The run's Poisson request rate (requests/s) when it was an online run at a finite rate, else None (a closed
    loop, or `inf`: every request at once, a burst the batch drains); exit 2 for a rate that is neither."""
    rate, conc = doc.get("request_rate"), doc.get("max_concurrency")
    if isinstance(conc, int) and not isinstance(conc, bool) and conc > 0:
        return None  # a closed loop of max_concurrency clients
    if rate is None or rate == "inf" or (isinstance(rate, float) and rate == math.inf):
        return None
    value = _number(doc, "request_rate", where)
    if value <= 0:
        raise InputError(f"{where}: request_rate: 0: expected requests/s > 0, or inf for every request at once")
    return value


def _vllm_result(doc: dict[str, Any], where: str, model: ModelArchitecture, hardware: Hardware, precision: str,
                 tp: int, engines: int = 1) -> list[Observation]:
    """TPOT and output throughput (decode) and TTFT (prefill) of one `vllm bench serve` result.

    Lengths are the run's means. A run at a finite request rate is an online run: the load model `estimate --rate`
    uses at the rate one engine served (_online_result). Otherwise the running batch is max_concurrency when set
    (a closed loop; sent unpaced with `--save-detailed` lengths its throughput is the replayed loop's, tail and
    all), else Little's law (request throughput x mean end-to-end latency; without mean_e2el_ms, which older runs leave
    out, the mean TTFT plus (output - 1) x mean TPOT). `engines`: how many engines shared the run's requests
    (a load balancer in front): each served 1/engines of the rate, the concurrency and the throughput.
    """
    from infragen.sizing.drain import completed_lengths  # imported when used, as in _burst_result
    from infragen.sizing.estimate import estimate

    _check_clients(doc, where)
    completed = _number(doc, "completed", where)
    if completed < 1:
        raise InputError(f"{where}: completed: no request completed, nothing to calibrate on")
    input_len = max(1, round(_number(doc, "total_input_tokens", where) / completed))
    output_len = max(2, round(_number(doc, "total_output_tokens", where) / completed))
    rate = _online_rate(doc, where)
    if rate is not None:
        return _online_result(doc, where, model, hardware, precision, tp, rate / engines, input_len, output_len,
                              engines)
    loop: tuple[list[int], list[int]] | None = None
    burst = False  # every request at once: its TTFTs are the wait for the prompts ahead, not a speed
    if isinstance(doc.get("max_concurrency"), int) and doc["max_concurrency"] > 0:
        conc = max(1, math.ceil(int(doc["max_concurrency"]) / engines))
        loop = completed_lengths(doc, where) if _unpaced(doc) else None
        if loop is None and _unpaced(doc):
            click.echo(f"note: {where} is a closed loop of {doc['max_concurrency']} clients and holds no per-request "
                       "lengths: its throughput is calibrated as a steady state at that batch, which over-states the "
                       "speed the run's tail (fewer requests left than clients) shows; `vllm bench serve "
                       "--save-detailed` keeps the lengths, and calibrate then replays the loop", err=True)
    else:
        lengths = completed_lengths(doc, where)
        if lengths is not None:
            return _burst_result(doc, where, model, hardware, precision, tp, engines, *lengths)
        click.echo(f"note: {where} sent every request at once (no --request-rate, no --max-concurrency) and holds no "
                   "per-request lengths: calibrated as a steady state at its average batch (Little's law), which "
                   "over-states the speed a burst of long-tailed requests shows; `vllm bench serve --save-detailed` "
                   "keeps the lengths, and calibrate then replays the burst", err=True)
        if "mean_e2el_ms" in doc:
            e2e_ms = _number(doc, "mean_e2el_ms", where)
        else:
            e2e_ms = _number(doc, "mean_ttft_ms", where) + (output_len - 1) * _number(doc, "mean_tpot_ms", where)
        conc = max(1, round(_number(doc, "request_throughput", where) * e2e_ms / 1e3 / engines))
        burst = True

    def at(d: float, p: float) -> Estimate:
        return estimate(model, hardware, precision=precision, engine="vllm", tp=tp, input_len=input_len,
                        output_len=output_len, concurrency=conc, decode_factor=d, prefill_factor=p)

    est = at(1.0, 1.0)
    if not est.fits:
        raise InputError(f"{where}: the model says this setup does not fit ({est.reason}); check --model, "
                         "--precision, --tp and the hardware")
    if loop is not None:  # TPOT and TTFT stay the steady state's at the loop's batch: the tail is a few requests'
        out = _burst_result(doc, where, model, hardware, precision, tp, engines, *loop, clients=conc)
    else:
        out = [Observation(f"{where}", "output_throughput", "decode",
                           _speed(doc, "output_throughput", where) / engines, est.output_tokens_per_s,
                           model=lambda d, p: at(d, p).output_tokens_per_s, whole_run=True)]
    if doc.get("median_tpot_ms"):
        out.append(Observation(where, "median_tpot_ms", "decode", 1e3 / _number(doc, "median_tpot_ms", where),
                               1e3 / est.tpot_ms, as_time=True, model=lambda d, p: 1e3 / at(d, p).tpot_ms))
    if doc.get("median_ttft_ms") and conc <= est.max_concurrency and not burst:
        out.append(Observation(where, "median_ttft_ms", "prefill", 1e3 / _number(doc, "median_ttft_ms", where),
                               1e3 / est.ttft_ms, as_time=True, model=lambda d, p: 1e3 / at(d, p).ttft_ms,
                               serving_path=True))
    return out


#: Most clients a closed loop is read with (policy: vLLM's own max_num_seqs tops out in the thousands).
MAX_CLIENTS = 1_000_000


def _check_clients(doc: dict[str, Any], where: str) -> None:
    """max_concurrency is absent, null (no cap) or a whole number of clients; anything else is exit 2."""
    clients = doc.get("max_concurrency")
    if clients is None or (isinstance(clients, int) and not isinstance(clients, bool) and clients <= MAX_CLIENTS):
        return
    raise InputError(f"{where}: max_concurrency: expected null or a whole number of clients up to {MAX_CLIENTS:,} "
                     f"(got {_shown(clients)})")


def _unpaced(doc: dict[str, Any]) -> bool:
    """No finite --request-rate: requests are sent as soon as the run (or a free client) allows."""
    rate = doc.get("request_rate")
    return rate is None or rate == "inf" or (isinstance(rate, float) and math.isinf(rate))


#: An inter-token gap is a stop of the engine when it lasts this long and this many times the run's median gap:
#: longer than any prefill step of a served batch, as the mid-run kernel compiles of Lambda's Mixtral runs were
#: (1.2 - 5 s among 0.04 - 0.1 s gaps; docs/performance-model.md). Policy, not a measurement.
STOP_S = 1.0
STOP_TIMES_MEDIAN = 20.0


def generation_stops(doc: dict[str, Any]) -> tuple[int, float, float] | None:
    """(stops, the longest in s, the median gap in s) when the result's per-request inter-token gaps
    (`--save-detailed`'s `itls`) show the engine stopping (gaps of STOP_S and STOP_TIMES_MEDIAN x the median or
    more); None when they do not, or the result holds no well-formed gaps (they are only read for this)."""
    itls = doc.get("itls")
    if not isinstance(itls, list) or not all(isinstance(row, list) for row in itls):
        return None
    gaps = [g for row in itls for g in row]
    if not gaps or not all(isinstance(g, int | float) and not isinstance(g, bool) and 0 <= g < math.inf
                           for g in gaps):
        return None
    median = statistics.median(gaps)
    stops = [g for g in gaps if g >= STOP_S and g >= STOP_TIMES_MEDIAN * median]
    return (len(stops), max(stops), median) if stops else None


def _say_stops(doc: dict[str, Any], where: str) -> None:
    found = generation_stops(doc)
    if found is not None:
        n, longest, median = found
        click.echo(f"note: {where} stopped generating {n} time(s) for up to {longest:.2f} s (its median inter-token "
                   f"gap is {median * 1e3:.0f} ms): a pause of the engine, such as kernels compiled on first traffic "
                   "(vLLM's fused-MoE Triton kernel does this), is calibrated as slowness; warm the server with one "
                   "run and calibrate on the next", err=True)


def _burst_result(doc: dict[str, Any], where: str, model: ModelArchitecture, hardware: Hardware, precision: str,
                  tp: int, engines: int, ins: list[int], outs: list[int],
                  clients: int | None = None) -> list[Observation]:
    """A burst (every request at once), or with `clients` a closed loop of that many, with its per-request lengths:
    its output throughput against the replay of the same requests (sizing/drain.py). With `engines` behind a
    balancer each served every engines-th request. A burst's TTFT and TPOT hold its own queueing, so only the
    throughput is fitted."""
    from infragen.sizing.drain import burst_drain

    mine_in, mine_out = ins[::engines], outs[::engines]
    try:
        replay = burst_drain(model, hardware, precision=precision, tp=tp, input_lens=mine_in, output_lens=mine_out,
                             clients=clients)
    except InputError as exc:
        raise InputError(f"{where}: {exc.message}; check --model, --precision, --tp and the hardware") from None
    run = f"closed loop of {len(mine_in)} requests" if clients else f"burst of {len(mine_in)} requests"
    source = f"{where} {run} replayed ({replay.limits})"
    return [Observation(source, "output_throughput", "decode", _speed(doc, "output_throughput", where) / engines,
                        replay.result.output_tokens_per_s, model=replay.result.output_tokens_per_s_at,
                        whole_run=True)]


def _online_result(doc: dict[str, Any], where: str, model: ModelArchitecture, hardware: Hardware, precision: str,
                   tp: int, rate: float, input_len: int, output_len: int, engines: int = 1) -> list[Observation]:
    """Median TPOT (generation) and median TTFT (prompt) of an online run against the load model at `rate` (one
    engine's requests/s) with vLLM's default scheduler, as `estimate --rate` predicts them. Its output throughput
    is the arrival rate's, not a speed: not fitted.

    Where the model puts `rate` past the engine's capacity it has no latency to compare (its queue grows without
    bound; a finite run's latencies are a queue as long as the run made it): the run's output throughput is then a
    floor of the engine's capacity (`Observation.at_least`), which raises the factors when the model's capacity is
    below it and leaves them otherwise. Factors from its latencies would run to the bounds (nerdalert's Llama-3.1-8B
    at 30 and 35/s on one H100: generation x1.20, prompt x1.33, the bounds, with the model infinite at both)."""
    from functools import cache

    from infragen.sizing.load import LoadPoint
    from infragen.sizing.load_estimate import LoadModel, prepare_load

    @cache
    def load_at(d: float, p: float) -> LoadModel:
        load = prepare_load(model, hardware, precision=precision, tp=tp, input_len=input_len, output_len=output_len,
                            decode_factor=d, prefill_factor=p)
        if not isinstance(load, LoadModel):
            raise InputError(f"{where}: the model says this setup does not fit ({load.reason}); check --model, "
                             "--precision, --tp and the hardware")
        return load

    @cache
    def at(d: float, p: float) -> LoadPoint:
        return load_at(d, p).at(rate, quantiles=(0.5,))

    def per_s(seconds: float) -> float:
        return 1.0 / seconds if 0 < seconds < math.inf else 0.0

    source = f"{where} at {rate:g}/s per engine"
    point = at(1.0, 1.0)
    if not point.stable:
        served = _speed(doc, "output_throughput", where) / engines

        def capacity(d: float, p: float) -> float:
            return load_at(d, p).capacity_per_s() * output_len

        click.echo(f"note: {where}: at {rate:g} requests/s per engine the model puts the engine past its capacity "
                   f"({load_at(1.0, 1.0).capacity_per_s():.1f}/s at {input_len} + {output_len} tokens): its latencies "
                   f"are a queue as long as the run made it, not a speed; its output throughput ({served:.0f} tok/s "
                   "per engine) is calibrated as a floor of the engine's capacity", err=True)
        return [Observation(source, "output_throughput_floor", "decode", served, capacity(1.0, 1.0), model=capacity,
                            whole_run=True, at_least=True)]
    out = []
    if doc.get("median_tpot_ms"):
        out.append(Observation(source, "median_tpot_ms", "decode", 1e3 / _number(doc, "median_tpot_ms", where),
                               per_s(point.tpot_s), as_time=True, model=lambda d, p: per_s(at(d, p).tpot_s)))
    if doc.get("median_ttft_ms"):
        out.append(Observation(source, "median_ttft_ms", "prefill", 1e3 / _number(doc, "median_ttft_ms", where),
                               per_s(point.ttft_p50_s), as_time=True, model=lambda d, p: per_s(at(d, p).ttft_p50_s),
                               serving_path=True))
    return out


def _documents(text: str, path: Path) -> list[Any]:
    """The file's JSON document, or each line of a JSON-lines file (`--append-result` appends one result a line)."""
    try:
        return [json.loads(text)]
    except json.JSONDecodeError as exc:
        lines = [line for line in text.splitlines() if line.strip()]
        if len(lines) > 1:
            try:
                return [json.loads(line) for line in lines]
            except json.JSONDecodeError:
                pass
        raise InputError(f"{path}: not JSON ({exc.msg} at line {exc.lineno}); give `vllm bench serve "
                         "--save-result` files (one result, or one a line) or `llama-bench -o json` output") from None


def calibration_kwargs(path: Path, hardware: Hardware, engine: str, model: ModelArchitecture,
                       precision: str | None = None, tp: int | None = None, pp: int = 1) -> dict[str, float]:
    """The estimate() arguments of the profile at `path` (its factors and any measured serving path), refused when
    made for other hardware, engine or model shapes; a note when measured with another weight type than
    `precision`."""
    cal = load_calibration(path, where="--calibration").for_model(model)
    profile = cal.profile
    if profile.engine != engine:
        raise InputError(f"{path}: engine: the profile was measured with {profile.engine}, this estimate is "
                         f"{engine}; calibrate with results of {engine}")
    if cal.other_model is not None:
        raise InputError(f"{path}: model: {cal.other_model.replace('this runs', 'this estimate runs')}")
    why = cal.why_not(hardware, engine, tp, pp)
    if why is not None:
        raise InputError(f"{path}: hardware: {why.replace('this candidate', 'this estimate')}; a calibration only "
                         "holds for the machine (vLLM: the GPU and tp of the engines) it was measured on")
    path_text = ("" if profile.serving_overhead_ms is None
                 else f", serving path {profile.serving_overhead_ms:.1f} ms")
    click.echo(f"calibration {path} applied: generation x{profile.decode_factor:.3f}, prompt x"
               f"{profile.prefill_factor:.3f}{path_text}; median error on its {len(profile.residuals)} measured "
               f"figures {median_abs_error(profile.residuals, 'before'):.1%} before, "
               f"{median_abs_error(profile.residuals, 'after'):.1%} after", err=True)
    other = None if precision is None else cal.other_type(precision)
    if other is not None:
        click.echo(f"note: {path}: {other}", err=True)
    return cal.estimate_kwargs()


@click.command()
@click.argument("results", nargs=-1, required=True, type=click.Path(path_type=Path, dir_okay=False))
@click.option("--model", "model_name", required=True, help="Registry name or config.json of the benchmarked model.")
@click.option("--precision", default=None, help="vLLM weight precision of the run (llama-bench: from its output).")
@click.option("--gpu", help="GPU name from the catalog (with --gpus).")
@click.option("--gpus", type=int, help="How many GPUs of --gpu.")
@click.option("--instance", help="Catalog instance type.")
@click.option("--hardware", "hardware_file", type=click.Path(path_type=Path), help="Machine YAML (hardware probe).")
@click.option("--tp", type=click.IntRange(min=1), default=None,
              help="vLLM tensor-parallel size of the run (default: all GPUs).")
@click.option("--replicas", type=click.IntRange(1, 10_000), default=1, show_default=True,
              help="vLLM engines the run's requests were spread over (a load balancer in front): each served 1/N "
                   "of the request rate, the concurrency and the throughput.")
@click.option("-o", "--output", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Write the profile here (default: print it).")
def calibrate(results: tuple[Path, ...], model_name: str, precision: str | None, gpu: str | None, gpus: int | None,
              instance: str | None, hardware_file: Path | None, tp: int | None, replicas: int,
              output: Path | None) -> None:
    """Fit this machine's generation and prompt speed factors (and a vLLM deployment's serving path) from benchmark
    result files."""
    from infragen.catalog.models import resolve_model
    from infragen.cli.estimate_cmd import resolve_hardware
    from infragen.safe_load import read_text_bounded

    hardware = resolve_hardware(gpu, gpus, instance, hardware_file)
    run_tp = tp or max(1, hardware.gpu_count)  # vLLM: the engines' tensor-parallel size
    model = resolve_model(model_name, base_dir=Path.cwd(), where="--model")
    observations: list[Observation] = []
    inputs: list[CalibrationInput] = []
    engines = set()
    weight_types: set[str] = set()
    for path in results:
        text = read_text_bounded(path, what="benchmark result", limit=RESULT_FILE_BYTES)
        docs = _documents(text, path)
        kinds = {_kind(doc) for doc in docs}
        if None in kinds or len(kinds) != 1:
            raise InputError(f"{path}: neither a `vllm bench serve --save-result` file (output_throughput, "
                             "completed...) nor `llama-bench -o json` output (a list with avg_ts, n_gen...)")
        kind = kinds.pop()
        assert kind is not None
        for i, doc in enumerate(docs):
            where = path.name if len(docs) == 1 else f"{path.name}[{i}]"
            if kind == "llama-bench":
                engines.add("llama.cpp")
                observations += _llama_bench(doc, where, model, hardware)
                rows = doc["results"] if isinstance(doc, dict) else doc
                weight_types |= {_llama_bench_type(r, where, i) for i, r in enumerate(rows)}
            else:
                if precision is None:
                    raise InputError(f"{path}: a vLLM result does not say the weight precision: pass --precision")
                engines.add("vllm")
                weight_types.add(precision)
                _say_stops(doc, where)
                observations += _vllm_result(doc, where, model, hardware, precision, run_tp, replicas)
        inputs.append(CalibrationInput(file=path.name, sha256=hashlib.sha256(text.encode()).hexdigest(), kind=kind,
                                       engines=replicas))
    if len(engines) != 1:
        raise InputError("results of vLLM and llama.cpp calibrate different profiles: give one engine's files")
    engine = engines.pop()
    if not observations:
        raise InputError("the result files hold no measured speed (no tg/pp rows, no throughput)")
    fractions = None
    if engine == "vllm":
        assert precision is not None  # a vLLM result needs it (checked above)
        fractions = vllm_peak_fractions(model, hardware, precision, run_tp)
    bounds = physical_bounds(engine, hardware.measured_memory_bandwidth_gb_per_s is not None, fractions)
    observations = phased(observations)  # a prompt-bound run's throughput fits (and is shown as) prompt speed
    fit = fit_calibration(observations, bounds, serving_ms(engine))
    decode, prefill = fit.decode, fit.prefill
    rows = residuals(observations, decode, prefill, fit.serving_delta_ms)
    profile = CalibrationProfile(
        engine=engine, hardware=hardware.name, gpus=gpu_set(hardware) if engine == "vllm" else None,
        tp=run_tp if engine == "vllm" else None,
        cpu=cpu_of(hardware) if engine == "llama.cpp" else None,
        decode_factor=round(decode, 4), prefill_factor=round(prefill, 4), serving_overhead_ms=fit.serving_ms,
        decode_bounds=(round(bounds["decode"][0], 4), round(bounds["decode"][1], 4)),
        prefill_bounds=(round(bounds["prefill"][0], 4), round(bounds["prefill"][1], 4)),
        weight_types=sorted(weight_types), model=model.id, model_shape=model.speed_shape(), inputs=inputs,
        residuals=rows,
        created=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    )
    for r in rows:
        floor = " (at least)" if r.at_least else ""
        click.echo(f"{r.source:<40} {r.metric:<28} measured {r.measured:9.2f}{floor}  model {r.before:9.2f} "
                   f"({r.error('before'):+.1%})  calibrated {r.after:9.2f} ({r.error('after'):+.1%})", err=True)
    click.echo(f"{engine} on {hardware.name}: generation x{decode:.3f} (bounds {bounds['decode'][0]:.2f}-"
               f"{bounds['decode'][1]:.2f}), prompt x{prefill:.3f} (bounds {bounds['prefill'][0]:.2f}-"
               f"{bounds['prefill'][1]:.2f}){_serving_text(fit)}; median error "
               f"{median_abs_error(rows, 'before'):.1%} -> {median_abs_error(rows, 'after'):.1%}", err=True)
    _refuse_a_worse_fit(rows, results, decode, prefill)
    text_out = yaml.safe_dump(profile.model_dump(mode="json"), sort_keys=False)
    if output is None:
        click.echo(text_out, nl=False)
    else:
        from infragen.cli.output import write_text_file

        write_text_file(output, text_out, option="-o", example="profile.yaml")
        click.echo(f"wrote {output}", err=True)


def _refuse_a_worse_fit(rows: list[Residual], results: tuple[Path, ...], decode: float, prefill: float) -> None:
    """InputError when the fitted factors reproduce the results worse than no calibration does (the median miss and
    the largest both grow), or put a figure past capacity that the model predicted: the results then disagree with
    each other or with how they were described, and a profile of them would mislead every plan (each of the 123
    published results accuracy.py calibrates on alone is reproduced better than uncalibrated: none is refused)."""
    before, after = median_abs_error(rows, "before"), median_abs_error(rows, "after")
    lost = [r for r in rows if math.isfinite(r.before) and not math.isfinite(r.after)]
    worst = [max((abs(r.error(w)) for r in rows), default=0.0) for w in ("before", "after")]
    if not lost and (after <= before + 1e-9 or worst[1] <= worst[0] + 1e-9):
        return  # a compromise (some figures a little worse, the largest miss smaller) is a fit
    names = ", ".join(p.name for p in results)
    why = (f"; {lost[0].metric} of {lost[0].source} goes from {lost[0].before:.4g} to infinite (past capacity)"
           if lost else "")
    raise InputError(f"{names}: the fitted factors (generation x{decode:.3f}, prompt x{prefill:.3f}) reproduce "
                     f"these results worse than the uncalibrated model (median error {before:.1%} -> "
                     f"{after:.1%}){why}: the results disagree with each other or with how they are described "
                     "(--model, --precision, --gpu/--gpus or --instance, --tp, --replicas; the run's totals and "
                     "throughputs); no profile written")


def _serving_text(fit: Fit) -> str:
    """What the summary line says of the serving path: fitted from short-prompt TTFTs, or the default kept."""
    if fit.serving_ms is None:
        return ""
    return (f", serving path {fit.serving_ms:.1f} ms (the default {fit.default_serving_ms:.1f}; from the TTFTs "
            "of prompts too short to time prefill)")


__all__ = ["calibrate", "calibration_kwargs", "load_profile"]
