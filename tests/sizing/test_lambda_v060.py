"""Lambda's vLLM 0.6.0 H100 runs (benchmarks/data/lambda_v060/, rows EX0089-EX0112) are replayed with their own
per-request lengths, and their tp series is checked as one (accuracy_checks.tp_series_report)."""

from __future__ import annotations

import json

import pytest

from benchmarks import accuracy
from benchmarks.accuracy_checks import tp_series_report
from benchmarks.calibration_rows import DATA, Burst, burst_lengths, burst_of, read_rows, recorded_lengths

ROWS = {r["id"]: r for r in read_rows() if "[tp series: lambda-v0.6.0-h100]" in r["notes"]}


def test_every_row_names_its_lengths_file_and_agrees_with_it() -> None:
    assert len(ROWS) == 24
    for row in ROWS.values():
        burst = burst_of(row)
        assert burst is not None and burst.requests == 320 and burst.lengths is not None
        data = json.loads((DATA / burst.lengths).read_text())
        assert float(row["value"]) == round(data["output_throughput"], 2)
        assert int(row["tp"]) == int(burst.lengths.split("_tp")[1].split("_")[0])
        assert sum(data["input_lens"]) == data["total_input_tokens"]
        assert sum(data["output_lens"]) == data["total_output_tokens"]
        ins, outs = burst_lengths(burst, int(row["input_len"]), int(row["output_len"]))
        assert round(sum(ins) / len(ins)) == int(row["input_len"])
        assert round(sum(outs) / len(outs)) == int(row["output_len"])


def test_recorded_lengths_leave_out_the_requests_that_streamed_nothing(tmp_path) -> None:
    f = tmp_path / "r.json"
    f.write_text(json.dumps({"input_lens": [10, 20, 30], "output_lens": [5, 0, 7]}))
    assert recorded_lengths(f) == ([10, 30], [5, 7])
    assert burst_lengths(Burst(3, "sharegpt", None), 10, 4)[0] == [10, 10, 10]  # no file: from the means
    f.write_text(json.dumps({"input_lens": [1], "output_lens": [1, 2]}))
    with pytest.raises(ValueError, match="1 input lengths but 2 output lengths"):
        recorded_lengths(f)


def test_the_tp_series_report_compares_ratios_to_the_lowest_tp() -> None:
    outcomes = [o for o in (accuracy.evaluate_row(r) for r in ROWS.values()) if not isinstance(o, str)]
    assert len(outcomes) == 24
    lines = tp_series_report(outcomes)
    series = [line for line in lines if "h100-sxm" in line]
    assert len(series) == 7  # seven models, each at two tp or more
    mixtral = next(line for line in series if "Mixtral" in line)
    by_id = {o.row_id: o for o in outcomes}
    tp = {int(r["tp"]): i for i, r in ROWS.items() if "Mixtral" in r["model"]}
    measured = by_id[tp[8]].measured / by_id[tp[2]].measured
    predicted = by_id[tp[8]].predicted / by_id[tp[2]].predicted
    assert f"tp8/tp2 {measured:.2f} vs {predicted:.2f} ({predicted / measured - 1:+.0%})" in mixtral
    assert lines[-1].startswith("  lambda-v0.6.0-h100: ratios within 20%: ")
