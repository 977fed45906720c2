"""Calibration profiles: per-hardware/engine speed factors fitted from the user's own benchmark results.

Fits factors from (measured, predicted) pairs within physical bounds, describes the profile file, reads one back
and says which machines it holds for; reading result files and printing lives in cli/calibrate_cmd.py.
estimate() and the load model apply the factors when given them; the search applies a profile only to the
candidates on the hardware and engine it was measured on, for a model of the shapes it was measured with
(`Calibration.for_model`, `Calibration.why_not`).
"""

from __future__ import annotations

import hashlib
import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from infragen.architecture import ModelArchitecture
from infragen.errors import InputError
from infragen.sizing.constants import load_constants
from infragen.sizing.types import Hardware

Phase = Literal["decode", "prefill"]
#: Largest serving path a fit may set: a first token 10 s after the prompt's own time is a broken or overloaded
#: server, not a path to plan with (policy, not a measurement).
MAX_SERVING_MS = 10_000.0
#: A figure fits the part of its modelled time that is at least this share: a TTFT whose prompt processing is less
#: measures HTTP, templating and tokenisation more than prefill speed, so it fits the serving path, not the prompt
#: factor; a run's throughput whose prompt processing is more fits the prompt factor, not the generation one.
SERVING_SHARE = 0.5
#: Slowest factor a fit may set: a result 5x slower than the model says is a broken run or a wrong
#: description (threads, GPU count), not an efficiency to learn (policy, not a measurement).
MIN_FACTOR = 0.2
#: Largest factor a profile may hold (its fields' own limit).
MAX_FACTOR = 20.0
#: Rounding a profile's figures went through (written to 4 decimals).
BOUND_SLACK = 1e-4


def relative_error(predicted: float, measured: float, at_least: bool = False) -> float:
    """predicted / measured - 1; for a floor (`at_least`: the engine served at least `measured`) only a shortfall."""
    err = predicted / measured - 1.0
    return min(0.0, err) if at_least else err


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CalibrationInput(_Frozen):
    """One result file a profile was fitted on."""

    file: str = Field(max_length=500)
    """File name as given to `infragen calibrate`."""
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    """Digest of the file's bytes."""
    kind: Literal["vllm-bench-serve", "llama-bench"]
    """Which tool wrote it."""
    engines: int = Field(default=1, ge=1, le=10_000)
    """vLLM engines the run's requests were spread over (`calibrate --replicas`)."""


class Residual(_Frozen):
    """One measured figure, predicted before and after the calibration."""

    source: str = Field(max_length=500)
    """File and entry it came from."""
    metric: str = Field(max_length=60)
    """tg128_tokens_per_s, median_tpot_ms..."""
    phase: Phase
    measured: float
    before: float
    after: float
    at_least: bool = False
    """`measured` is a floor, not a figure to reproduce: the output throughput of an online run that fell behind
    its request rate (the engine served at least that much). Only a prediction below it is an error."""

    def error(self, which: Literal["before", "after"]) -> float:
        """predicted / measured - 1 (a floor's: 0 at or above it)."""
        return relative_error(getattr(self, which), self.measured, self.at_least)


class CalibrationProfile(_Frozen):
    """A calibration profile (`infragen calibrate -o FILE`, read by `estimate/plan --calibration FILE`)."""

    schema_version: Literal[1] = 1
    kind: Literal["infragen-calibration"] = "infragen-calibration"
    engine: Literal["vllm", "llama.cpp"]
    """Engine the results were measured with; the profile applies to estimates of this engine only."""
    hardware: str = Field(max_length=200)
    """Hardware name the results were measured on (`--gpu`/`--instance`/hardware file name)."""
    gpus: str | None = Field(default=None, max_length=200)
    """The GPUs of `hardware` as `N x GPU` (vLLM results): the profile then holds for any machine with exactly
    those GPUs, since a vLLM estimate reads only the GPUs (sizing/memo.py). None: `hardware` alone decides."""
    tp: int | None = Field(default=None, ge=1, le=1024)
    """vLLM: the tensor-parallel size of the engines the results ran (`calibrate --tp`, default every GPU of the
    hardware). With it the profile holds for engines of that size on that GPU, on any machine: a vLLM estimate of
    one engine reads its GPU and tp only, so eight tp-1 engines on p5.48xlarge are the engine measured on one H100,
    and one tp-8 engine on the same machine is not (its all-reduce was never measured). None: a profile written
    before 2026-12-06, which holds for machines with exactly `gpus`, as it did."""
    cpu: str | None = Field(default=None, max_length=200)
    """The CPU of `hardware` (llama.cpp results): vendor, microarchitecture and vCPUs. With it the profile holds
    only where the CPU is the same too: hardware files of different machines may carry the same name (the probe
    names them by vendor and cores). None: `hardware` alone decides."""
    decode_factor: float = Field(gt=0, le=20)
    """Multiplies predicted generation speed (divides TPOT); 1 = no change."""
    prefill_factor: float = Field(gt=0, le=20)
    """Multiplies predicted prompt-processing speed (divides the prefill part of TTFT); 1 = no change."""
    serving_overhead_ms: float | None = Field(default=None, ge=0, le=MAX_SERVING_MS)
    """vLLM: the serving path's fixed part of every TTFT (HTTP, chat template, tokenisation, streaming) as this
    deployment's results measured it, in place of the engine's default (performance.yaml first_token_overhead_ms);
    None: the default. Fitted from TTFTs the serving path dominates (short prompts), so those do not set the
    prompt factor."""
    decode_bounds: tuple[float, float]
    """Range the decode fit was held to: MIN_FACTOR .. the factor at which the kernel would reach 100 % of
    the bandwidth figure the model uses."""
    prefill_bounds: tuple[float, float]
    """Range of the prefill fit: MIN_FACTOR .. 100 % of the compute peak."""
    weight_types: list[Annotated[str, Field(max_length=40)]] | None = Field(default=None, max_length=20)
    """The weight types the results ran (vLLM: `calibrate --precision`; llama-bench: its model types as GGUF
    names). Its factors are applied to other types too, with a note: other types run other kernels, whose errors
    differ (the Intel llama-bench runs: F16 decode +15 % where Q4_0 is -1 %). None: a profile written before
    2026-12-06, which does not say."""
    model: str | None = Field(default=None, max_length=200)
    """The model the results ran (`calibrate --model`: its registry id, or the config file's name)."""
    model_shape: str | None = Field(default=None, pattern=r"^[0-9a-f]{16}$")
    """ModelArchitecture.speed_shape of that model. The profile holds for estimates of a model of this shape only:
    calibrated on one result, the other results of the same hardware moved away from their measurements where they
    ran another model (benchmarks/calibrate_check.py: vLLM within 10 % 510 -> 437 of 1,267 figures, llama.cpp 206
    -> 192 of 312) and towards them where they ran the same one (205 -> 224 of 423, 122 -> 132 of 195): the model's
    errors follow a model's shapes, and a factor learnt on one shape carries its error there (only on the Zen 5
    machine, whose every figure the model missed the same way, did other models gain: 132 -> 149 of 180).
    None: a profile written before 2026-12-06, which holds for any model, as it did then."""
    inputs: list[CalibrationInput]
    """The result files, with digests."""
    residuals: list[Residual]
    """Every measured figure: predicted before and after."""
    created: str = Field(max_length=40)
    """UTC time the profile was written."""

    @model_validator(mode="after")
    def _factors_within_their_bounds(self) -> CalibrationProfile:
        """A factor outside the bounds it was fitted within (or bounds below MIN_FACTOR) was not written by
        `calibrate`: a hand edit that would make every estimate on this hardware up to 100x off."""
        for phase in ("decode", "prefill"):
            low, high = getattr(self, f"{phase}_bounds")
            factor = getattr(self, f"{phase}_factor")
            if not MIN_FACTOR - BOUND_SLACK <= low <= high <= MAX_FACTOR:
                raise ValueError(f"{phase}_bounds: [{low:g}, {high:g}] is not a range within [{MIN_FACTOR:g}, "
                                 f"{MAX_FACTOR:g}]")
            if not low - BOUND_SLACK <= factor <= high + BOUND_SLACK:
                raise ValueError(f"{phase}_factor: {factor:g} lies outside {phase}_bounds [{low:g}, {high:g}], the "
                                 "range it was fitted within")
        return self

    def gpu_parts(self) -> tuple[str, str]:
        """`gpus` split into its count and GPU (`("1", "h100-sxm-80gb")`); ("", "") when it is not `N x GPU`."""
        if self.gpus is None or " x " not in self.gpus:
            return "", ""
        count, gpu = self.gpus.split(" x ", 1)
        return count, gpu

    @model_validator(mode="after")
    def _tp_within_its_gpus(self) -> CalibrationProfile:
        """A tp no measured engine could have run (more GPUs than the machine had, or on llama.cpp) was not written
        by `calibrate`: it would calibrate engines of that size on that GPU everywhere."""
        if self.tp is None:
            return self
        if self.engine != "vllm":
            raise ValueError(f"tp: a {self.engine} profile has no tensor-parallel size; remove tp")
        count = self.gpu_parts()[0]
        if count.isdigit() and self.tp > int(count):
            raise ValueError(f"tp: {self.tp} is more GPUs than the profile's gpus ({self.gpus}) could run in one "
                             "engine")
        return self


@dataclass(frozen=True)
class Observation:
    """One measured speed and the model's prediction of it, both as rates (higher = faster)."""

    source: str
    metric: str
    phase: Phase
    measured: float
    predicted: float
    as_time: bool = False
    """True when the figure is a time in ms: `measured`/`predicted` hold 1000 / ms (a rate, fitted like the
    others) and residuals show it in ms again."""
    model: Callable[[float, float], float] | None = field(default=None, compare=False)
    """The model's prediction (as a rate, like `predicted`) at given (generation, prompt) factors, when known."""
    serving_path: bool = False
    """A time (ms) that holds the serving path once (a vLLM TTFT): a calibrated path shifts it by the difference."""
    whole_run: bool = False
    """A run's output throughput: its time holds prompt processing as well as generation, so it fits the phase
    that holds most of its modelled time (`phased`), not always generation."""
    at_least: bool = False
    """A floor: the engine served at least `measured` (an online run past its capacity: its throughput). It raises
    its phase's factor to where the model reaches it and never lowers one (fit_factors)."""

    def shifted(self, delta_ms: float) -> Observation:
        """The same figure with the serving path `delta_ms` longer (a time that holds it; others unchanged)."""
        if not (self.serving_path and self.as_time and delta_ms):
            return self
        model = self.model

        def moved(rate: float) -> float:  # a rate of 0 is an infinite time (past saturation): it stays so
            return 1e3 / (1e3 / rate + delta_ms) if rate > 0 else 0.0

        return replace(self, predicted=moved(self.predicted),
                       model=None if model is None else lambda d, p: moved(model(d, p)))


def physical_bounds(engine: str, bandwidth_measured: bool = False,
                    fractions: tuple[float, float] | None = None) -> dict[Phase, tuple[float, float]]:
    """Largest factors that keep each phase at or below 100 % of the peak the model divides by.

    vLLM: `fractions` are the calibrated setup's (vllm_peak_fractions: the largest bandwidth and compute shares
    its kernels run at); without them, the largest of every kernel the engine's profile models (the tightest
    bound, right for any setup)."""
    c = load_constants()
    if engine == "llama.cpp":
        bw = c.cpu.measured_bandwidth_fraction if bandwidth_measured else c.cpu.generation_bandwidth_fraction
        return {"decode": (MIN_FACTOR, 1.0 / bw), "prefill": (MIN_FACTOR, 1.0 / c.cpu.prompt_flops_fraction)}
    bandwidth, compute = fractions if fractions is not None else _every_vllm_fraction()
    return {"decode": (MIN_FACTOR, 1.0 / bandwidth), "prefill": (MIN_FACTOR, 1.0 / compute)}


def serving_ms(engine: str) -> float:
    """The engine's default serving path (ms) that its TTFT predictions hold (performance.yaml)."""
    engines = load_constants().engines
    return engines[engine].first_token_overhead_ms if engine in engines else 0.0


def _every_vllm_fraction() -> tuple[float, float]:
    """The largest bandwidth and compute shares of any kernel engines.vllm models (performance.yaml)."""
    e = load_constants().engines["vllm"]
    bandwidth = [e.decode_bandwidth_fraction, e.kv_bandwidth_fraction, e.moe_bandwidth_fraction or 0.0]
    compute = [e.prefill_compute_fraction]
    if e.linear_kernel is not None:
        bandwidth.append(e.linear_kernel.read_fraction)
        compute += [e.linear_kernel.compute_fraction, e.linear_kernel.fp8_compute_fraction]
    if e.moe_kernel is not None:
        bandwidth.append(e.moe_kernel.read_fraction)
        compute += [e.moe_kernel.compute_fraction, e.moe_kernel.fp8_compute_fraction]
    if e.layer_ops is not None:
        o = e.layer_ops
        bandwidth += [o.norm_read_fraction, o.activation_read_fraction, o.rope_read_fraction]
        compute.append(o.attention_compute_fraction)
    if e.moe_layer_ops is not None:
        bandwidth.append(e.moe_layer_ops.norm_bandwidth_fraction)
    return max(bandwidth), max(compute)


def vllm_peak_fractions(model: ModelArchitecture, hardware: Hardware, precision: str, tp: int) -> tuple[float, float]:
    """The largest bandwidth and compute shares at which the step model runs any kernel of `model` in `precision`
    on `hardware`'s GPUs at tensor-parallel `tp` (performance.peak_fractions)."""
    from infragen.sizing.performance import gpu_figures, gpu_setup, peak_fractions

    if hardware.accelerator is None:
        raise InputError(f"{hardware.name}: a vLLM calibration needs a machine with GPUs")
    pp = max(1, hardware.gpu_count // max(1, tp))
    setup = gpu_setup(model, gpu_figures(hardware.accelerator), precision, 1.0, "vllm", tp, pp, 1)
    return peak_fractions(setup)


def fit_factor(observations: list[Observation], phase: Phase, bounds: tuple[float, float]) -> float:
    """exp(median log(measured/predicted)) of the phase's rates, clipped to bounds; 1.0 with no observation."""
    logs = [math.log(o.measured) - math.log(o.predicted) for o in observations
            if o.phase == phase and o.measured > 0 and o.predicted > 0]
    if not logs:
        return 1.0
    return min(bounds[1], max(bounds[0], math.exp(statistics.median(logs))))


#: Bisection steps of a figure's own factor (on log(factor) over the bounds: far below any figure's precision).
SOLVE_STEPS = 40
#: A rate standing for 0 (a load model past saturation predicts an infinite time, a rate of 0) in the solver's logs.
TINY_RATE = 1e-300
#: Rounds of serving-path-then-factors fitting at most, and the change in the path (ms) that ends them.
SERVING_ROUNDS = 30
SERVING_TOLERANCE_MS = 0.01
#: Rounds of generation-then-prompt fitting (a throughput also holds prompt time, a TTFT generation time).
FIT_ROUNDS = 3


def _solve(o: Observation, phase: Phase, others: float, bounds: tuple[float, float]) -> float:
    """The factor of `phase` at which the model gives `o`'s measured figure (the other phase's factor held at
    `others`), held to `bounds`; the plain ratio for an observation without a model."""
    if o.model is None:
        return min(bounds[1], max(bounds[0], o.measured / o.predicted))

    def gap(log_f: float) -> float:
        f = math.exp(log_f)
        assert o.model is not None
        rate = o.model(f, others) if phase == "decode" else o.model(others, f)
        return math.log(max(rate, TINY_RATE)) - math.log(o.measured)  # rate 0: past saturation at f

    lo, hi = math.log(bounds[0]), math.log(bounds[1])
    if gap(lo) >= 0:
        return bounds[0]
    if gap(hi) <= 0:
        return bounds[1]
    for _ in range(SOLVE_STEPS):
        mid = (lo + hi) / 2.0
        if gap(mid) < 0:
            lo = mid
        else:
            hi = mid
    return math.exp((lo + hi) / 2.0)


def fit_factors(observations: list[Observation], bounds: dict[Phase, tuple[float, float]]) -> tuple[float, float]:
    """(generation, prompt) factors within `bounds`: each the median over its phase's figures of the factor at
    which the model reproduces the figure (generation first, then prompt with it; FIT_ROUNDS times).

    Solving through the model, not dividing measured by predicted: a factor scales only its phase's part of a
    figure (the prompt factor the prefill part of TTFT, not its serving overhead or first generation step), so the
    ratio of whole figures would over- or under-correct; 1.0 for a phase without figures. A floor (`at_least`)
    then raises its phase's factor to the one at which the model reaches it, if that is higher."""
    usable = [o for o in observations if o.measured > 0 and (o.predicted > 0 or o.model is not None)]
    factors = {"decode": 1.0, "prefill": 1.0}
    for _ in range(FIT_ROUNDS if any(o.model is not None for o in usable) else 1):
        for phase, other in (("decode", "prefill"), ("prefill", "decode")):
            mine = [o for o in usable if o.phase == phase and not o.at_least]
            if mine:
                logs = [math.log(_solve(o, phase, factors[other], bounds[phase])) for o in mine]  # type: ignore
                factors[phase] = min(bounds[phase][1], max(bounds[phase][0], math.exp(statistics.median(logs))))
            floors = [_solve(o, phase, factors[other], bounds[phase])  # type: ignore[arg-type]
                      for o in usable if o.phase == phase and o.at_least]
            factors[phase] = max([factors[phase], *floors])
    return factors["decode"], factors["prefill"]


@dataclass(frozen=True)
class Fit:
    """What a calibration fitted: the two speed factors and, when TTFTs the serving path dominates were measured,
    that path (ms)."""

    decode: float
    prefill: float
    serving_ms: float | None = None
    default_serving_ms: float = 0.0
    """The engine's own serving path, which the observations' predictions hold."""

    @property
    def serving_delta_ms(self) -> float:
        return 0.0 if self.serving_ms is None else self.serving_ms - self.default_serving_ms


def phased(observations: list[Observation]) -> list[Observation]:
    """The observations with each whole run's throughput given the phase that holds most of its modelled time: a
    burst of long prompts (or of replies of a few tokens) spends its time prefilling, and fitting the generation
    factor to it would credit prompt speed to generation (gpustack's 128-in / 4-out bursts gave generation x0.2,
    the bound)."""
    out = []
    for o in observations:
        if o.whole_run and o.model is not None and o.phase == "decode" and _prompt_share(o, 1.0) > SERVING_SHARE:
            o = replace(o, phase="prefill")
        out.append(o)
    return out


def fit_calibration(observations: list[Observation], bounds: dict[Phase, tuple[float, float]],
                    default_serving_ms: float = 0.0) -> Fit:
    """fit_factors on the observations `phased`, and the serving path from the TTFTs it dominates.

    A TTFT whose modelled prompt processing is under SERVING_SHARE of it (a short prompt) measures the serving path
    (HTTP, chat template, tokenisation: the deployment's, not the GPU's) more than prefill speed; fitting the prompt
    factor to it would make long prompts as slow as the path is long (a factor of 0.2 from a 60 ms TTFT of 200
    tokens). Those TTFTs give the path instead: the engine's default plus the median of what they miss by at the
    fitted factors; the factors come from the other figures with the path applied, the two in turn until the path
    moves by less than SERVING_TOLERANCE_MS."""
    usable = [o for o in phased(observations) if o.measured > 0 and (o.predicted > 0 or o.model is not None)]
    decode, prefill = fit_factors(usable, bounds)
    path = [o for o in usable if o.serving_path and o.as_time and o.model is not None
            and _prompt_share(o, decode) < SERVING_SHARE]
    if not path:
        return Fit(decode, prefill, None, default_serving_ms)
    rest = [o for o in usable if all(o is not q for q in path)]
    decode, prefill = fit_factors(rest, bounds) if rest else (1.0, 1.0)  # the path's figures set no factor
    delta = math.inf
    for _ in range(SERVING_ROUNDS):  # the path and the prompt factor, each with the other's last value, until still
        last = delta
        delta = statistics.median(1e3 / o.measured - 1e3 / max(o.model(decode, prefill), TINY_RATE)  # type: ignore
                                  for o in path)
        delta = min(MAX_SERVING_MS, max(0.0, default_serving_ms + delta)) - default_serving_ms
        if not rest or abs(delta - last) < SERVING_TOLERANCE_MS:
            break
        decode, prefill = fit_factors([o.shifted(delta) for o in rest], bounds)
    return Fit(decode, prefill, round(default_serving_ms + delta, 2), default_serving_ms)


def _prompt_share(o: Observation, decode: float) -> float:
    """Share of a figure's modelled time that is prompt processing (a rate's time is its inverse): 1 - the time at a
    near-infinite prompt speed / the time at the model's own (prompt factor 1), generation at `decode`."""
    assert o.model is not None
    return max(0.0, 1.0 - max(o.model(decode, 1.0), TINY_RATE) / max(o.model(decode, 1e6), TINY_RATE))


def residuals(observations: list[Observation], decode: float, prefill: float,
              serving_delta_ms: float = 0.0) -> list[Residual]:
    """Before/after of every observation (times shown as times)."""
    out = []
    for o in observations:
        factor = decode if o.phase == "decode" else prefill
        moved = o.shifted(serving_delta_ms)
        after = moved.model(decode, prefill) if moved.model is not None else moved.predicted * factor
        if o.as_time:
            out.append(Residual(source=o.source, metric=o.metric, phase=o.phase, measured=1e3 / o.measured,
                                before=_ms(o.predicted), after=_ms(after)))
        else:
            out.append(Residual(source=o.source, metric=o.metric, phase=o.phase, measured=o.measured,
                                before=o.predicted, after=after, at_least=o.at_least))
    return out


def _ms(rate: float) -> float:
    """A time in ms from its rate (1000 / ms); inf past saturation."""
    return 1e3 / rate if rate > 0 else math.inf


def median_abs_error(rows: list[Residual], which: Literal["before", "after"]) -> float:
    """Median |predicted/measured - 1| of the residuals (a floor's counts only a prediction below it)."""
    errs = [abs(r.error(which)) for r in rows if r.measured]
    return statistics.median(errs) if errs else 0.0


#: What to do when a profile is missing or unreadable (the error's second half).
WRITE_ONE = "a calibration profile is the YAML `infragen calibrate RESULT... -o FILE` writes"


def load_profile(path: Path, *, where: str = "") -> tuple[CalibrationProfile, str]:
    """(the profile at `path`, the sha256 of its bytes); InputError naming `where` (the option or the workload's
    field that named it), the file and the field on any problem."""
    from infragen.safe_load import parse_yaml_text, read_text_bounded
    from infragen.validation import validate_file_data

    prefix = f"{where}: " if where else ""
    try:
        text = read_text_bounded(path, what="calibration profile")
        raw = parse_yaml_text(text, path)
        profile = validate_file_data(path, raw, CalibrationProfile, what="calibration profile")
    except InputError as exc:
        raise InputError(f"{prefix}{exc.message}; {WRITE_ONE}") from None
    return profile, hashlib.sha256(text.encode()).hexdigest()


def cpu_of(hardware: Hardware) -> str | None:
    """`vendor microarchitecture, N vCPUs` of a machine's CPU, None without one."""
    if hardware.cpu is None:
        return None
    return f"{hardware.cpu.vendor} {hardware.cpu.microarchitecture}, {hardware.vcpus or '?'} vCPUs"


def gpu_set(hardware: Hardware) -> str | None:
    """`N x GPU` of a machine with GPUs (the name a vLLM estimate's GPU-only view carries), else None."""
    return None if hardware.accelerator is None else f"{hardware.gpu_count} x {hardware.accelerator.id}"


@dataclass(frozen=True)
class Calibration:
    """A profile as `estimate`/`plan` apply it: what it says, the file it came from and the file's digest."""

    profile: CalibrationProfile
    file: str
    sha256: str
    other_model: str | None = None
    """Why it does not hold for the model being estimated or planned (set by `for_model`), None when it does."""

    def for_model(self, model: ModelArchitecture) -> Calibration:
        """This calibration as it applies to estimates of `model`: to none of them when the profile was measured
        with a model of another shape (CalibrationProfile.model_shape)."""
        p = self.profile
        if p.model_shape is None or p.model_shape == model.speed_shape():
            return replace(self, other_model=None)
        return replace(self, other_model=(
            f"it was measured with {p.model or 'another model'}, this runs {model.id}, a model of other shapes "
            "(calibrate with a result of this model: a factor fitted on one model's shapes moved other models' "
            "estimates away from their measurements)"))

    def estimate_kwargs(self) -> dict[str, float]:
        """What estimate(), the load model and the open-loop sizing take from it: the two factors and, when it
        measured one, the serving path."""
        p = self.profile
        kw = {"decode_factor": p.decode_factor, "prefill_factor": p.prefill_factor}
        if p.serving_overhead_ms is not None:
            kw["serving_overhead_ms"] = p.serving_overhead_ms
        return kw

    @property
    def measured_on(self) -> str:
        """The hardware as the profile names it (its GPUs when it has them; the engine's when it records its tp)."""
        p = self.profile
        gpu = self._engine_gpu()
        if gpu is not None:
            return f"{p.tp} x {gpu} engines (tp {p.tp})"
        return p.gpus or p.hardware

    def _engine_gpu(self) -> str | None:
        """The GPU of a vLLM profile that records its engines' tp (and its GPUs as `N x GPU`), else None."""
        p = self.profile
        gpu = p.gpu_parts()[1]
        return gpu if p.engine == "vllm" and p.tp is not None and gpu else None

    def other_type(self, precision: str) -> str | None:
        """A note when the profile was measured with weight types other than `precision`, else None."""
        types = self.profile.weight_types
        if not types or precision in types:
            return None
        return (f"the calibration was measured with {', '.join(types)} weights and this runs {precision}: its factors "
                "are applied, but another weight type runs other kernels and may miss differently; calibrate with a "
                f"result of {precision}")

    def why_not(self, hardware: Hardware, engine: str, tp: int | None = None, pp: int = 1) -> str | None:
        """None when the profile holds for `engine` on `hardware` (vLLM: engines of `tp` x `pp` GPUs), else why
        not (one clause).

        Holds for the machine it was measured on (same name) and, for vLLM, engines of the tp it measured on its
        GPU on any machine (a profile without its tp: any machine with the same GPUs)."""
        p = self.profile
        if engine != p.engine:
            return f"it was measured with {p.engine}, this candidate runs {engine}"
        if self.other_model is not None:
            return self.other_model
        gpu = self._engine_gpu()
        if gpu is not None and tp is not None:
            here = None if hardware.accelerator is None else hardware.accelerator.id
            if here != gpu:
                return f"it was measured on {self.measured_on}, this candidate is {gpu_set(hardware) or hardware.name}"
            if (tp, pp) != (p.tp, 1):
                return (f"it was measured with engines of tp {p.tp} on {gpu}, this candidate runs tp {tp}"
                        + (f" x pp {pp}" if pp > 1 else "") + " (tensor parallelism changes the step)")
            return None
        names = {hardware.name, gpu_set(hardware)}
        if p.cpu is not None and p.engine == "llama.cpp" and cpu_of(hardware) not in (None, p.cpu):
            return f"it was measured on {p.hardware} ({p.cpu}), this candidate is {hardware.name} ({cpu_of(hardware)})"
        if p.hardware in names or (p.gpus is not None and p.gpus in names):
            return None
        return f"it was measured on {self.measured_on}, this candidate is {gpu_set(hardware) or hardware.name}"


def load_calibration(path: Path, *, shown: str | None = None, where: str = "") -> Calibration:
    """The profile at `path` (`shown`: the name to record, as the user wrote it)."""
    profile, digest = load_profile(path, where=where)
    return Calibration(profile, shown if shown is not None else str(path), digest)
