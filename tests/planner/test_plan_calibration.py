"""`infragen plan --calibration FILE` and the workload's `calibration:` field: a profile changes only the candidates
on the hardware and engine it was measured on, the plan says which, records the profile's digest, and every bad
file is exit 2 naming the file and the field."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import yaml

from infragen.cli import main

ROOT = Path(__file__).resolve().parents[2]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        main(list(argv))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def workload(tmp_path: Path, example: str = "light-api", **changes: object) -> Path:
    data = yaml.safe_load((ROOT / "examples" / f"{example}.yaml").read_text(encoding="utf-8"))
    data.update(changes)
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def profile(tmp_path: Path, name: str = "t4.yaml", *, engine: str = "vllm", hardware: str = "1 x t4-16gb",
            decode: float = 0.5, prefill: float = 0.8, **extra: object) -> Path:
    doc = {"schema_version": 1, "kind": "infragen-calibration", "engine": engine, "hardware": hardware,
           "decode_factor": decode, "prefill_factor": prefill, "decode_bounds": [0.2, 1.6],
           "prefill_bounds": [0.2, 2.0], "inputs": [], "residuals": [], "created": "2026-12-04T18:00:00+00:00",
           **extra}
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def plan_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:  # type: ignore[type-arg]
    code, out, err = run(capsys, "plan", *argv, "--format", "json")
    assert code == 0, err
    return json.loads(out)  # type: ignore[no-any-return]


def test_profile_changes_only_its_hardware_and_the_plan_records_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    w = workload(tmp_path)
    p = profile(tmp_path)
    plain = plan_json(capsys, str(w))
    assert "calibration" not in plain  # no profile: the plan (and its digest) as before
    calibrated = plan_json(capsys, str(w), "--calibration", str(p))
    cal = calibrated["calibration"]
    assert cal["sha256"] == hashlib.sha256(p.read_bytes()).hexdigest()
    assert (cal["engine"], cal["hardware"], cal["decode_factor"], cal["prefill_factor"]) == (
        "vllm", "1 x t4-16gb", 0.5, 0.8)
    # every instance type with one T4 is calibrated, and nothing else
    assert "g4dn.xlarge" in cal["applied_to"] and "g4dn.2xlarge" in cal["applied_to"]
    assert not any(t.startswith(("g5.", "g6.", "g6e.")) for t in cal["applied_to"])
    assert "g4dn.12xlarge" not in cal["applied_to"]  # four T4s: not the hardware it was measured on
    assert cal["not_applied"] > 0
    assert calibrated["digest"] != plain["digest"]
    # a T4 at half the generation speed no longer wins with the same figures: other GPUs are unchanged
    def tpot(doc: dict, itype: str) -> float | None:  # type: ignore[type-arg]
        rows = [a for a in doc["alternatives"] if a["instance_type"] == itype]
        if doc["deployment"]["instance_type"] == itype:
            return float(doc["estimate"]["tpot_ms"])
        return float(rows[0]["tpot_ms"]) if rows else None
    assert tpot(calibrated, "g6.xlarge") == tpot(plain, "g6.xlarge")
    assert calibrated["deployment"]["instance_type"] != "g4dn.xlarge" or (
        calibrated["deployment"]["replicas"] > plain["deployment"]["replicas"])
    said = " ".join(calibrated["explanation"])
    assert f"calibration {p}" in said and "g4dn.xlarge" in said and "generation x0.500" in said


def test_a_measured_serving_path_moves_the_ttft_of_its_hardware_only(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    w = workload(tmp_path)
    plain = plan_json(capsys, str(w), "--all", "--calibration", str(profile(tmp_path, decode=1.0, prefill=1.0)))
    slow = plan_json(capsys, str(w), "--all", "--calibration",
                     str(profile(tmp_path, "path.yaml", decode=1.0, prefill=1.0, serving_overhead_ms=60.0)))
    assert plain["calibration"]["serving_overhead_ms"] is None and slow["calibration"]["serving_overhead_ms"] == 60.0
    assert "serving path 60.0 ms" in " ".join(slow["explanation"])

    def ttft(doc: dict, itype: str) -> float | None:  # type: ignore[type-arg]
        if doc["deployment"]["instance_type"] == itype:
            return float(doc["estimate"]["ttft_ms"])
        rows = [a for a in doc["alternatives"] if a["instance_type"] == itype and a.get("ttft_ms") is not None]
        return float(rows[0]["ttft_ms"]) if rows else None

    t4_plain, t4_slow = ttft(plain, "g4dn.xlarge"), ttft(slow, "g4dn.xlarge")
    assert t4_plain is not None and t4_slow is not None and t4_slow > t4_plain + 40.0  # ~50 ms more, at its batch
    assert ttft(slow, "g6.xlarge") == ttft(plain, "g6.xlarge")  # other hardware: the default path


def test_the_profile_digest_moves_the_plan_digest(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    w = workload(tmp_path, instance_families={"allow": ["g6"]})  # no T4 in scope: applies to nothing
    a = plan_json(capsys, str(w), "--calibration", str(profile(tmp_path, "a.yaml")))
    b = plan_json(capsys, str(w), "--calibration", str(profile(tmp_path, "b.yaml", decode=0.6)))
    assert a["calibration"]["applied_to"] == [] and "applied to no candidate" in " ".join(a["explanation"])
    assert a["estimate"] == b["estimate"] and a["digest"] != b["digest"]


def test_workload_field_is_relative_to_the_workload_and_the_option_replaces_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "profiles").mkdir()
    profile(tmp_path / "profiles", "t4.yaml")
    w = workload(tmp_path, calibration="profiles/t4.yaml")
    by_field = plan_json(capsys, str(w))
    assert by_field["calibration"]["file"] == "profiles/t4.yaml" and by_field["calibration"]["applied_to"]
    other = profile(tmp_path, "other.yaml", decode=1.0, prefill=1.0, hardware="1 x a10g-24gb")
    by_option = plan_json(capsys, str(w), "--calibration", str(other))
    assert by_option["calibration"]["hardware"] == "1 x a10g-24gb"


def test_llama_cpp_profile_applies_to_cpu_candidates_of_that_instance_only(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    w = workload(tmp_path, "cpu-edge")
    plain = plan_json(capsys, str(w))
    chosen = plain["deployment"]["instance_type"]
    p = profile(tmp_path, engine="llama.cpp", hardware=chosen, decode=0.5, prefill=0.5)
    calibrated = plan_json(capsys, str(w), "--calibration", str(p))
    assert calibrated["calibration"]["applied_to"] == [chosen]
    assert calibrated["deployment"]["instance_type"] != chosen or (
        calibrated["estimate"]["tpot_ms"] > plain["estimate"]["tpot_ms"])


def test_explain_says_whether_the_profile_applied(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    w = workload(tmp_path)
    p = profile(tmp_path)
    code, out, err = run(capsys, "plan", str(w), "--calibration", str(p), "--explain", "g4dn.xlarge")
    assert code == 0, err
    assert f"calibration {p}" in out and "generation x0.500" in out
    code, out, err = run(capsys, "plan", str(w), "--calibration", str(p), "--explain", "g6.xlarge")
    assert code == 0, err
    assert f"calibration {p} does not apply" in out and "1 x t4-16gb" in out and "1 x l4-24gb" in out


def test_missing_profile_is_exit_2_naming_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    w = workload(tmp_path, calibration="nope.yaml")
    code, out, err = run(capsys, "plan", str(w))
    assert code == 2 and out == ""
    assert f"{w}: calibration:" in err and "nope.yaml" in err and "file not found" in err
    assert "infragen calibrate" in err
    code, _, err = run(capsys, "plan", str(workload(tmp_path)), "--calibration", str(tmp_path / "gone.yaml"))
    assert code == 2 and "--calibration:" in err and "gone.yaml: file not found" in err


@pytest.mark.parametrize("change, needle", [
    ({"decode_factor": -1}, "decode_factor"),
    ({"engine": "tgi"}, "engine"),
    ({"kind": "something-else"}, "kind"),
    ({"serving_overhead_ms": -5.0}, "serving_overhead_ms"),
    ({"serving_overhead_ms": 1e9}, "serving_overhead_ms"),
    ({"serving_overhead_ms": "fast"}, "serving_overhead_ms"),
    ({"serving_overhead_ms": float("nan")}, "serving_overhead_ms"),
])
def test_bad_profile_is_exit_2_naming_file_and_field(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      change: dict, needle: str) -> None:  # type: ignore[type-arg]
    p = profile(tmp_path, **{k: v for k, v in change.items() if k not in {"decode_factor", "engine"}},
                **({"decode": change["decode_factor"]} if "decode_factor" in change else {}),
                **({"engine": change["engine"]} if "engine" in change else {}))
    code, out, err = run(capsys, "plan", str(workload(tmp_path)), "--calibration", str(p))
    assert code == 2 and out == ""
    assert f"{p}: {needle}" in err


def test_profile_that_is_not_yaml_mapping_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "p.yaml"
    p.write_text("- just\n- a list\n", encoding="utf-8")
    code, _, err = run(capsys, "plan", str(workload(tmp_path)), "--calibration", str(p))
    assert code == 2 and str(p) in err and "calibration profile" in err


def test_calibration_field_form_is_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "validate", str(workload(tmp_path, calibration="")))
    assert code == 2 and "calibration" in err


def test_the_plan_says_when_the_profile_measured_another_weight_type(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    w = workload(tmp_path, "cpu-edge")  # plans q4_k_m weights
    chosen = plan_json(capsys, str(w))["deployment"]["instance_type"]
    p = profile(tmp_path, engine="llama.cpp", hardware=chosen, decode=1.0, prefill=1.0, weight_types=["q4_0"])
    lines = " ".join(plan_json(capsys, str(w), "--calibration", str(p))["explanation"])
    assert "measured with q4_0 weights" in lines and "this runs q4_k_m" in lines
    same = profile(tmp_path, "same.yaml", engine="llama.cpp", hardware=chosen, decode=1.0, prefill=1.0,
                   weight_types=["q4_k_m"])
    assert "this runs" not in " ".join(plan_json(capsys, str(w), "--calibration", str(same))["explanation"])


def test_a_profile_of_another_model_applies_to_no_candidate_and_says_why(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from infragen.catalog.models import resolve_model

    w = workload(tmp_path)
    plain = plan_json(capsys, str(w))
    planned = resolve_model(yaml.safe_load(w.read_text())["model"], base_dir=ROOT, where="t")
    other = resolve_model("mixtral-8x7b", base_dir=ROOT, where="t")
    assert other.speed_shape() != planned.speed_shape()
    p = profile(tmp_path, model="mixtral-8x7b", model_shape=other.speed_shape())
    calibrated = plan_json(capsys, str(w), "--calibration", str(p))
    assert calibrated["deployment"] == plain["deployment"] and calibrated["calibration"]["applied_to"] == []
    said = calibrated["explanation"][-1]
    assert "applied to no candidate: it was measured with mixtral-8x7b" in said and f"runs {planned.id}" in said
    same = profile(tmp_path, "same.yaml", model=planned.id, model_shape=planned.speed_shape())
    assert plan_json(capsys, str(w), "--calibration", str(same))["calibration"]["applied_to"]


def test_a_profile_with_its_tp_calibrates_engines_of_that_size_on_larger_machines(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    w = workload(tmp_path)
    old = plan_json(capsys, str(w), "--calibration", str(profile(tmp_path)))["calibration"]
    p = profile(tmp_path, "tp1.yaml", gpus="1 x t4-16gb", tp=1)
    doc = plan_json(capsys, str(w), "--all", "--calibration", str(p))
    cal = doc["calibration"]
    assert cal["hardware"] == "1 x t4-16gb engines (tp 1)"
    assert set(old["applied_to"]) <= set(cal["applied_to"])
    assert not any(t.startswith(("g5.", "g6.", "g6e.")) for t in cal["applied_to"])
    # a four-T4 machine's tp-1 engines are calibrated, its tp-2 and tp-4 engines are not
    assert "g4dn.12xlarge" in cal["applied_to"] and "g4dn.12xlarge" not in old["applied_to"]
    code, out, err = run(capsys, "plan", str(w), "--calibration", str(p), "--explain", "g4dn.12xlarge")
    assert code == 0 and "Its estimates at tp=1 are calibrated" in out, err
    assert "the others are not (it was measured with engines of tp 1 on t4-16gb, this candidate runs tp " in out
