"""A rendered argv the pinned parser would refuse is a bug: exit 70 with the refused flag first, not a truncated
argv (the CLI cuts an internal error's text at 300 characters, and a vLLM argv is longer than that)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import textwrap

import pytest

from infragen.catalog.engines import pinned_release
from infragen.sizing import engine_args


def test_a_flag_the_release_lacks_is_named_first() -> None:
    full = pinned_release("vllm")
    options = {k: v for k, v in full.options.items() if k != "--enable-prefix-caching"}
    stripped = dataclasses.replace(full, options=options)
    argv = ["vllm", "serve", "org/m", "--enable-prefix-caching"]
    engine_args._check("vllm", argv, full)  # the pinned release accepts it
    with pytest.raises(engine_args.EngineArgvError) as info:
        engine_args._check("vllm", argv, stripped)
    err = info.value
    assert err.exit_code == 70
    assert err.message.startswith("the pinned vllm 0.34.0 would refuse the command line infragen rendered: "
                                  "--enable-prefix-caching is not an option of vllm 0.34.0")
    assert err.fix and "vllm.yaml" in err.fix


def test_the_cli_shows_it_whole_with_exit_70() -> None:
    # The CLI boundary with a renderer that emits an unknown flag (a bug): one paragraph, the problem first.
    script = textwrap.dedent("""
        import click
        from infragen import cli
        from infragen.sizing import engine_args

        @click.command()
        def boom() -> None:
            engine_args._check("vllm", ["vllm", "serve", "org/m"] + ["--max-model-len", "8192"] * 40 + ["--nope"])

        cli._COMMANDS["boom"] = ("__main__", "boom", "a renderer bug")
        cli.main(["boom"])
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 70, proc.stderr
    assert proc.stderr.startswith("Error: the pinned vllm 0.34.0 would refuse the command line infragen rendered: "
                                  "--nope is not an option of vllm 0.34.0")
    assert "  To fix: a bug in infragen" in proc.stderr and "Traceback" not in proc.stderr
