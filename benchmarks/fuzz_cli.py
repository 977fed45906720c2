"""Fuzz `infragen validate` and `infragen plan` with mutated workload files, as an attacker would (issue #21).

Each case is a workload file (and sometimes a config.json next to it) mutated from the examples: wrong types,
YAML 1.1 oddities, alias bombs, deep nesting, 20,000-key mappings, 300,000-item lists, huge and tiny numbers,
control characters, shell metacharacters, hostile config.json files. Every case runs through the CLI entry point
with a time limit and a memory cap, and the run counts what breaks the promise "exit 0, 2 or 3 with a message":
tracebacks, runs over the limit, out-of-memory and any other exit status.

    python benchmarks/fuzz_cli.py --cases 2500               # fork mode: main() in a forked child (fast)
    python benchmarks/fuzz_cli.py --cases 200 --exec infragen  # the real executable, one process per run

Exit status 1 when anything broke the promise. Deterministic for a given --seed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))
COMMANDS = ("validate", "plan")
#: Memory cap of one run (address space); the reported blow-up reached 2.7 GB.
MEMORY_CAP_BYTES = 2 * 1024**3

SHELL = ["$(touch /tmp/pwned)", "`id`", "a;reboot", "a|b", "a&&b", "'", '"', "a b", "--help", "-rf", "../../etc",
         "${IFS}", "\\", "%n%s", "*", "?", "~root", "a\nb", "a\rb", "\x00", "\x1b[31m", "\u202e", "é", "😀"]
ODDITIES = ["yes", "no", "on", "off", "Y", "~", "null", "0o17", "0x1F", "1_000", "1:30", ".inf", "-.inf", ".NaN",
            "2001-12-14", "!!binary aGVsbG8=", "!!python/object:os.system [id]", "!!set {a, b}", "0b101", "+12",
            "!!float 1", "!!str 5", "'5'", "[]", "{}", "''", "-", "&a 1", "*undefined", "<<: {}"]
NUMBERS = ["1.0e+308", "-1.0e+308", "1e-320", "4.9e-324", "0", "-0", "-1", "0.0", "1e999", "9" * 401, "9" * 5000,
           "-" + "9" * 401, "18446744073709551617", "3.0", "1e20", "123456789012345678901234567890"]
FIELDS = ["name", "model", "weights", "precision", "kv_cache_dtype", "engine", "cloud", "regions", "pricing",
          "min_replicas", "budget_usd_per_month", "port", "allow_multi_node", "allow_unpriced",
          "traffic.peak_requests_per_s", "traffic.concurrent_users", "traffic.prompt_tokens",
          "traffic.output_tokens", "traffic.max_context_tokens", "slo.ttft_p99_ms", "slo.tpot_ms", "slo.e2e_p99_ms",
          "instance_families.allow", "instance_families.deny", "schema_version"]
HF = {"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
      "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256, "max_position_embeddings": 8192,
      "_name_or_path": "org/model"}


@dataclass
class Case:
    kind: str
    workload: str
    config_json: str | None = None


@dataclass
class Outcome:
    case: int
    kind: str
    command: str
    code: int
    seconds: float
    traceback: bool
    oom: bool
    tail: str


@dataclass
class Report:
    outcomes: list[Outcome] = field(default_factory=list)

    def broken(self, limit_s: float) -> list[Outcome]:
        return [o for o in self.outcomes if o.traceback or o.oom or o.seconds > limit_s or o.code not in (0, 2, 3)]


# --- mutations -----------------------------------------------------------------------------------------------


def _set(lines: list[str], dotted: str, value: str) -> list[str]:
    """The workload with `dotted` set to the YAML text `value` (appended as a block, replacing a top-level key)."""
    top, _, sub = dotted.partition(".")
    kept = [ln for ln in lines if not (not sub and ln.startswith(f"{top}:"))]
    if sub:
        # nested: add the key under its block, creating the block if absent
        for i, ln in enumerate(kept):
            if ln.startswith(f"{top}:") and ln.rstrip().endswith(":"):
                return [*kept[: i + 1], f"  {sub}: {value}", *kept[i + 1:]]
        return [*kept, f"{top}:", f"  {sub}: {value}"]
    return [*kept, f"{top}: {value}"]


def _base(rng: random.Random) -> list[str]:
    text = rng.choice(EXAMPLES).read_text()
    return [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]


def _mutate(rng: random.Random, kind: str) -> Case:
    lines = _base(rng)
    target = rng.choice(FIELDS)
    if kind == "wrong-type":
        value = rng.choice(["[1, 2]", "{a: 1}", "true", "false", "null", "'text'", "3", "2.5", "[[]]", "{}", "''"])
        return Case(kind, "\n".join(_set(lines, target, value)) + "\n")
    if kind == "yaml-oddity":
        return Case(kind, "\n".join(_set(lines, target, rng.choice(ODDITIES))) + "\n")
    if kind == "number":
        return Case(kind, "\n".join(_set(lines, target, rng.choice(NUMBERS))) + "\n")
    if kind == "shell":
        value = rng.choice(SHELL) + rng.choice(["", "x", "/y", ".gguf"])
        if rng.random() < 0.5:
            value = rng.choice(["org/", "s3://", "oss://", "s3://b/", ""]) + value
        return Case(kind, "\n".join(_set(lines, target, json.dumps(value))) + "\n")
    if kind == "control":
        value = "".join(rng.choice([chr(rng.randrange(0, 32)), "a", "\x7f", "\u2028"]) for _ in range(8))
        return Case(kind, "\n".join(_set(lines, target, json.dumps(value))) + "\n")
    if kind == "alias-bomb":
        levels = rng.randrange(5, 11)
        bomb = ["x-a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
        bomb += [f"x-a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels)]
        body = _set(lines, target, f"*a{levels - 1}")
        return Case(kind, "\n".join(bomb + body) + "\n")
    if kind == "deep-nesting":
        depth = rng.choice([50, 200, 1000, 5000, 50_000])
        value = "[" * depth + "]" * depth if rng.random() < 0.5 else "{a: " * depth + "1" + "}" * depth
        return Case(kind, "\n".join(_set(lines, target, value)) + "\n")
    if kind == "many-keys":
        keys = "{" + ", ".join(f"k{i}: {i}" for i in range(20_000)) + "}"
        return Case(kind, "\n".join(_set(lines, target if rng.random() < 0.5 else "traffic", keys)) + "\n")
    if kind == "big-list":
        items = "[" + ", ".join(["us-east-1"] * 300_000) + "]"
        return Case(kind, "\n".join(_set(lines, rng.choice(["regions", "precision", target]), items)) + "\n")
    if kind == "config-json":
        return _config_case(rng, lines)
    raise ValueError(kind)


def _config_case(rng: random.Random, lines: list[str]) -> Case:
    cfg: dict[str, object] = dict(HF)
    choice = rng.randrange(8)
    text: str
    if choice == 0:
        cfg["rope_scaling"] = {"rope_type": "yarn", "factor": 1.5, "original_max_position_embeddings": 4096}
        text = json.dumps(cfg).replace("1.5", rng.choice(["Infinity", "NaN", "1e308", "-Infinity", "1e999"]))
    elif choice == 1:
        text = json.dumps(cfg)[:-1] + ', "x": ' + "[" * 100_000 + "]" * 100_000 + "}"
    elif choice == 2:
        key = rng.choice(["hidden_size", "num_hidden_layers", "vocab_size", "max_position_embeddings"])
        text = json.dumps(cfg).replace(f'"{key}": {cfg[key]}', f'"{key}": ' + "9" * rng.choice([20, 401, 5000]))
    elif choice == 3:
        cfg[rng.choice(list(HF))] = rng.choice([None, True, "x", [], {}, -1, 0, 1.5])
        text = json.dumps(cfg)
    elif choice == 4:
        cfg["_name_or_path"] = rng.choice(SHELL) + "/" + rng.choice(SHELL)
        text = json.dumps(cfg)
    elif choice == 5:
        text = json.dumps(cfg)[:-1] + ', "hidden_size": 1}'
    elif choice == 6:
        text = json.dumps([cfg]) if rng.random() < 0.5 else "{" + ",".join(f'"k{i}":1' for i in range(50_000)) + "}"
    else:
        text = json.dumps(cfg)[: rng.randrange(1, 100)]
    body = _set(_set(lines, "model", "config.json"), "weights", "org/model")
    return Case("config-json", "\n".join(body) + "\n", text)


KINDS = ("wrong-type", "yaml-oddity", "number", "shell", "control", "alias-bomb", "deep-nesting", "many-keys",
         "big-list", "config-json")


def cases(count: int, seed: int) -> Iterator[Case]:
    """`count` mutated cases, every kind in turn (heavy kinds rarer), deterministic for `seed`."""
    rng = random.Random(seed)
    weights = [10, 10, 10, 12, 6, 4, 4, 1, 1, 8]
    for _ in range(count):
        yield _mutate(rng, rng.choices(KINDS, weights)[0])


# --- running -------------------------------------------------------------------------------------------------


def _run_forked(command: str, path: Path, limit_s: float) -> tuple[int, float, str]:
    """`infragen.cli.main([command, path])` in a forked child with a memory cap; (exit code, seconds, stderr)."""
    from infragen.cli import main

    err_path = path.with_suffix(f".{command}.err")
    start = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # child
        code = 1
        try:
            resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP_BYTES, MEMORY_CAP_BYTES))
            fd = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(fd, 2)
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)
            sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
            sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
            try:
                main([command, str(path)])
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            except BaseException:  # what the interpreter would do: print the traceback, exit 1
                import traceback

                traceback.print_exc()
                code = 1
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)
    deadline = start + limit_s
    status = None
    while time.perf_counter() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.005)
    else:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        return -9, time.perf_counter() - start, _tail(err_path)
    assert status is not None
    code = os.waitstatus_to_exitcode(status)
    return code, time.perf_counter() - start, _tail(err_path)


def _run_exec(exe: str, command: str, path: Path, limit_s: float) -> tuple[int, float, str]:
    start = time.perf_counter()

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP_BYTES, MEMORY_CAP_BYTES))

    try:
        r = subprocess.run([exe, command, str(path)], capture_output=True, text=True, timeout=limit_s,
                           preexec_fn=cap, errors="replace")
    except subprocess.TimeoutExpired:
        return -9, time.perf_counter() - start, ""
    return r.returncode, time.perf_counter() - start, r.stderr[:300] + "\n" + r.stderr[-2000:]


def _tail(path: Path) -> str:
    """The first 300 and the last 2,000 bytes of a child's stderr (a traceback's header is at its start)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(300)
            handle.seek(0, 2)
            size = handle.tell()
            handle.seek(max(300, size - 2000))
            return (head + b"\n" + handle.read()).decode("utf-8", "replace")
    finally:
        path.unlink(missing_ok=True)


def run(count: int, seed: int, *, limit_s: float = 10.0, exe: str | None = None,
        commands: tuple[str, ...] = COMMANDS) -> Report:
    """Run `count` cases through each command; the report lists every outcome."""
    report = Report()
    if exe is None:  # warm the catalog cache before forking, so each child plans at full speed
        from infragen.sizing import plan_file

        plan_file(REPO / "examples" / "team-chatbot.yaml")
    with tempfile.TemporaryDirectory(prefix="infragen-fuzz-") as tmp:
        for i, case in enumerate(cases(count, seed)):
            folder = Path(tmp) / f"c{i}"
            folder.mkdir()
            path = folder / "workload.yaml"
            path.write_text(case.workload, encoding="utf-8", errors="surrogatepass")
            if case.config_json is not None:
                (folder / "config.json").write_text(case.config_json)
            for command in commands:
                if exe is None:
                    code, seconds, err = _run_forked(command, path, limit_s)
                else:
                    code, seconds, err = _run_exec(exe, command, path, limit_s)
                report.outcomes.append(Outcome(
                    case=i, kind=case.kind, command=command, code=code, seconds=seconds,
                    traceback="Traceback (most recent call last)" in err,
                    oom="MemoryError" in err or (code == -9 and seconds < limit_s), tail=err[-300:]))
    return report


def summary(report: Report, limit_s: float) -> str:
    outs = report.outcomes
    broken = report.broken(limit_s)
    files = {o.case for o in broken}
    lines = [
        f"{len(outs)} runs ({len({o.case for o in outs})} files): {len(broken)} broke the promise "
        f"({len(files)} files)",
        f"  tracebacks: {sum(o.traceback for o in outs)}",
        f"  over {limit_s:.0f} s: {sum(o.seconds > limit_s for o in outs)}",
        f"  out of memory: {sum(o.oom for o in outs)}",
        f"  exit status not 0/2/3: {sum(o.code not in (0, 2, 3) for o in outs)}",
        f"  exit statuses: {dict(sorted(Counter(o.code for o in outs).items()))}",
        f"  slowest run: {max((o.seconds for o in outs), default=0):.2f} s",
        "  broken by kind: " + json.dumps(dict(Counter(o.kind for o in broken))),
    ]
    for o in broken[:10]:
        last = o.tail.strip().splitlines()[-1:] or [""]
        lines.append(f"  e.g. case {o.case} ({o.kind}, {o.command}): exit {o.code}, {o.seconds:.1f} s: {last[0][:160]}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--seed", type=int, default=21)
    parser.add_argument("--limit-s", type=float, default=10.0)
    parser.add_argument("--exec", dest="exe", default=None, help="run this executable instead of forking main()")
    args = parser.parse_args()
    start = time.perf_counter()
    report = run(args.cases, args.seed, limit_s=args.limit_s, exe=args.exe)
    print(summary(report, args.limit_s))
    print(f"  wall time: {time.perf_counter() - start:.0f} s")
    return 1 if report.broken(args.limit_s) else 0


if __name__ == "__main__":
    sys.exit(main())
