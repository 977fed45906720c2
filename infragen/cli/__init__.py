"""The `infragen` command line: the single error boundary of the tool.

Subcommands live in their own modules and are imported only when invoked, so `infragen plan`
never pays for (or imports) Pulumi, jinja2 or the refresh SDKs.
"""

from __future__ import annotations

import gc
import importlib
import os
import sys
import types
from typing import Any

import click

from infragen import __version__
from infragen.errors import InfragenError

#: command name -> (module, attribute, one-line help)
_COMMANDS: dict[str, tuple[str, str, str]] = {
    "plan": ("infragen.cli.plan_cmd", "plan", "Choose the cheapest deployment meeting every SLO (dry run)."),
    "estimate": ("infragen.cli.estimate_cmd", "estimate", "Predict memory, latency and throughput for one setup."),
    "catalog": ("infragen.cli.catalog_cmd", "catalog", "List instance types, GPUs and prices; refresh the data."),
    "validate": ("infragen.cli.spec_cmd", "validate", "Check a workload file."),
    "schema": ("infragen.cli.spec_cmd", "schema", "Print the JSON Schema of workload.yaml."),
    "models": ("infragen.cli.spec_cmd", "models", "List the model registry."),
    "render": ("infragen.cli.render_cmd", "render", "Write each node role's cloud-init user-data."),
    "diff": ("infragen.cli.diff_cmd", "diff", "Compare two plans (markdown for pull requests)."),
    "calibrate": ("infragen.cli.calibrate_cmd", "calibrate",
                  "Fit a machine's speed factors from vllm bench serve / llama-bench results."),
    "hardware": ("infragen.cli.hardware_cmd", "hardware",
                 "Measure this machine (cores, SIMD, memory bandwidth) into a --hardware file."),
    "preflight": ("infragen.cli.preflight_cmd", "preflight",
                  "Check a cloud account can take a stack's plan before `pulumi up` (quotas, zones, image)."),
}


class LazyGroup(click.Group):
    """A group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(_COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        entry = _COMMANDS.get(name)
        if entry is None:
            return None
        module = importlib.import_module(entry[0])
        cmd: click.Command = getattr(module, entry[1])
        return cmd

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, help_) for name, (_, _, help_) in _COMMANDS.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="infragen")
@click.option("--debug", is_flag=True, help="Show tracebacks for expected errors too.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Size, price and provision LLM inference deployments."""
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


#: Exit status of a bug in infragen (BSD sysexits EX_SOFTWARE), distinct from 2 (input) and 3 (infeasible).
EXIT_INTERNAL = 70
#: Longest exception text an internal-error line repeats (the rest is behind --debug).
_INTERNAL_TEXT_CHARS = 300


def main(argv: list[str] | None = None) -> Any:
    """Entry point and the one error boundary of every command.

    Expected failures become one `Error:` paragraph and exit 2 (input) or 3 (infeasible); anything else is a bug,
    reported as one "internal error" line with exit 70 and no traceback unless `--debug` is given.
    """
    debug = "--debug" in (argv if argv is not None else sys.argv[1:])
    _no_pydantic_plugins()
    # A command is short and allocates little cyclic garbage, while the cycle collector runs over and over during
    # the imports (pydantic schemas, dataclasses): off for the command, back on after (main is also called
    # in-process, by tests).
    collecting = gc.isenabled()
    gc.disable()
    try:
        return cli.main(args=argv, prog_name="infragen", standalone_mode=False)
    except InfragenError as exc:
        if debug:
            raise
        if exc.exit_code not in (2, 3, EXIT_INTERNAL):  # a bare InfragenError: a broken invariant, not bad input
            _internal(exc)
        click.echo(exc.render(), err=True)
        sys.exit(exc.exit_code)
    except (click.exceptions.Abort, KeyboardInterrupt):
        click.echo("Aborted.", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        # Usage errors (unknown option, bad choice) are input errors: exit 2 like click's own.
        exc.show()
        sys.exit(2)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except Exception as exc:  # the boundary: a bug must not print a traceback at a user (--debug shows it)
        if debug:
            raise
        _internal(exc)
    finally:
        if collecting:
            gc.enable()


def _no_pydantic_plugins() -> None:
    """infragen uses no pydantic plugin. Looking for them reads every installed distribution's metadata on the
    first model built (a tenth of `infragen plan`'s cold start in a small environment, more in a large one), and
    even with PYDANTIC_DISABLE_PLUGINS (pydantic's documented switch) pydantic imports its plugin loader, whose
    `importlib.metadata` import alone (email, zipfile, csv, socket, ...) costs a twentieth of the cold start.
    Under that switch the loader's one function returns no plugins, so that answer is registered in its place;
    a user's own PYDANTIC_DISABLE_PLUGINS (a list of plugin names) keeps pydantic's loader."""
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    name = "pydantic.plugin._loader"
    if os.environ["PYDANTIC_DISABLE_PLUGINS"] in ("__all__", "1", "true") and name not in sys.modules:
        loader = types.ModuleType(name, "pydantic's plugin loader with plugins disabled (infragen.cli)")
        loader.get_plugins = lambda: ()  # type: ignore[attr-defined]
        sys.modules[name] = loader


def _internal(exc: BaseException) -> None:
    text = str(exc)
    if len(text) > _INTERNAL_TEXT_CHARS:
        text = text[:_INTERNAL_TEXT_CHARS] + "..."
    text = " ".join(text.split())  # one line, whatever the exception carried
    click.echo(f"Error: internal error ({type(exc).__name__}: {text})\n"
               "  Hint: this is a bug in infragen; rerun with --debug for the traceback and report it.", err=True)
    sys.exit(EXIT_INTERNAL)
