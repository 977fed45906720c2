"""What each absent accelerator figure stops the planner from doing (shown by `infragen catalog gpus`).

Mirrors the checks in performance.py and search.py: a missing figure is never guessed, so the capability that needs
it is switched off. Pure: reads one Accelerator record.
"""

from __future__ import annotations

from dataclasses import dataclass

from infragen.catalog import Accelerator


@dataclass(frozen=True)
class FigureGap:
    """One absent figure and its consequence."""

    figure: str
    blocks: str


def figure_gaps(acc: Accelerator) -> list[FigureGap]:
    """The figures `acc` lacks that change what can be planned, each with what it blocks."""
    gaps: list[FigureGap] = []
    if acc.memory_bandwidth_gb_per_s is None:
        gaps.append(FigureGap("memory_bandwidth_gb_per_s", "every estimate (decode speed): never planned"))
    if acc.bf16_tflops is None and acc.fp16_tflops is None:
        gaps.append(FigureGap("fp16_tflops/bf16_tflops", "every estimate (prefill speed): never planned"))
    elif acc.bf16_tflops is None:
        gaps.append(FigureGap("bf16_tflops", "bf16 weights (fp16 still planned)"))
    if acc.fp8_tflops is None:
        # whether FP8 runs at all is compat.yaml's rule (compute capability); the figure only sets prefill speed
        gaps.append(FigureGap("fp8_tflops", "nothing: fp8 prefill uses the 16-bit peak (slower, conservative)"))
    if acc.int8_tops is None:
        gaps.append(FigureGap("int8_tops", "nothing: int8 prefill uses the 16-bit peak"))
    if acc.compute_capability is None:
        gaps.append(FigureGap("compute_capability", "fp8/AWQ kernel checks (compat.yaml cannot place the GPU)"))
    if acc.interconnect_gb_per_s is None:
        gaps.append(FigureGap("interconnect_gb_per_s", "nothing: tensor parallel assumes the default PCIe link"))
    return gaps
