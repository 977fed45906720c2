"""Check rendered `vllm serve` command lines against the pinned release's REAL parser (not the generated option
data): parse each with vLLM's own `make_arg_parser` and build `AsyncEngineArgs.from_cli_args`, as `vllm serve`
does before it touches a GPU. Reads one JSON argv per line on stdin (from `python -m infragen.catalog.refresh.
rendered_argvs`); prints one line per argv and exits 1 when any is refused.

Run in the same throwaway venv as vllm_args.py (stdlib + vllm only; it must not import infragen):
    python -m tests.rendered_argvs \\
      | VLLM_TARGET_DEVICE=cpu /tmp/vllm-env/bin/python infragen/catalog/refresh/vllm_argv_check.py
"""

from __future__ import annotations

import json
import sys


def main() -> int:
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.entrypoints.common.cli_args import make_arg_parser
    from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    refused = checked = 0
    for line in sys.stdin:
        if not line.strip():
            continue
        label, argv = json.loads(line)
        if argv[:2] != ["vllm", "serve"]:
            print(f"skip {label}: not a vllm serve command")
            continue
        checked += 1
        parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
        try:
            args = parser.parse_args(argv[2:])
            args.model = args.model_tag  # as `vllm serve` does before building the engine arguments
            engine_args = AsyncEngineArgs.from_cli_args(args)
            if engine_args.quantization not in (None, *QUANTIZATION_METHODS):  # ModelConfig checks it later
                raise ValueError(f"unknown quantization method {engine_args.quantization}")
        except (SystemExit, Exception) as exc:  # argparse exits; from_cli_args raises on bad values
            refused += 1
            print(f"REFUSED {label}: {type(exc).__name__}: {exc} :: {' '.join(argv)}")
            continue
        print(f"ok {label}")
    print(f"{checked} checked, {refused} refused")
    return 1 if refused or not checked else 0


if __name__ == "__main__":
    sys.exit(main())
