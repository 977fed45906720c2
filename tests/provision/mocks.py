"""Cloud-neutral Pulumi mock machinery: run a program under `pulumi.runtime.set_mocks` and record every
resource (type, name, inputs, parent, provider) and every invoke, with the program's resolved exports.

No cloud and no CLI. Clouds pass their invoke results (`call_results`) and computed outputs (`computed`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi
from pulumi.runtime import MockCallArgs, MockResourceArgs, Mocks

#: Per resource type: inputs -> extra outputs the real provider would compute (ARNs, DNS names...).
Computed = Mapping[str, Callable[[dict[str, Any], str], dict[str, Any]]]


@dataclass(frozen=True)
class Recorded:
    """One resource the program registered."""

    type: str
    """Pulumi type token (`aws:ec2/vpc:Vpc`, `pulumi:providers:aws`, `infragen:aws:Network`)."""
    name: str
    """Logical name."""
    inputs: dict[str, Any]
    """Inputs as the engine saw them (camelCase keys, secrets unwrapped)."""
    custom: bool
    """False for component resources."""


@dataclass
class Recording:
    """Everything one mocked run produced."""

    resources: list[Recorded] = field(default_factory=list)
    """Resources in registration order (components included)."""
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    """Invokes: (token, args)."""
    exports: dict[str, Any] = field(default_factory=dict)
    """The program's return value, fully resolved."""
    errors: list[str] = field(default_factory=list)
    """Errors the program logged (an exception inside an apply is reported here)."""
    warnings: list[str] = field(default_factory=list)
    """Warnings the program logged (`pulumi.log.warn`)."""
    options: dict[tuple[str, str], pulumi.ResourceOptions] = field(default_factory=dict)
    """Resource options by (type, name), as seen by a stack transformation (delete_before_replace...)."""

    def of_type(self, type_token: str) -> list[Recorded]:
        return [r for r in self.resources if r.type == type_token]

    def one(self, type_token: str) -> Recorded:
        found = self.of_type(type_token)
        assert len(found) == 1, f"expected one {type_token}, found {[r.name for r in found]}"
        return found[0]

    def types(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for r in self.resources:
            counts[r.type] = counts.get(r.type, 0) + 1
        return counts

    def custom_resources(self) -> Iterator[Recorded]:
        return (r for r in self.resources if r.custom and not r.type.startswith("pulumi:providers:"))

    def all_inputs_text(self, *, exclude_types: tuple[str, ...] = ()) -> dict[str, str]:
        """Each resource's inputs serialised to JSON text (for searching for leaked values)."""
        return {f"{r.type}::{r.name}": json.dumps(r.inputs, sort_keys=True, default=str)
                for r in self.resources if r.type not in exclude_types}


class RecordingMocks(Mocks):
    """Mocks that echo inputs as outputs (plus `computed` extras) and record everything."""

    def __init__(self, recording: Recording, call_results: Mapping[str, Any],
                 computed: Computed) -> None:
        self.recording = recording
        self.call_results = call_results
        self.computed = computed

    def new_resource(self, args: MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        inputs = {k: _unwrap_secrets(v) for k, v in args.inputs.items()}
        self.recording.resources.append(Recorded(type=args.typ, name=args.name, inputs=inputs,
                                                 custom=bool(args.custom) if args.custom is not None else True))
        resource_id = f"{args.name}-id"
        outputs = {**inputs, "id": resource_id}
        extra = self.computed.get(args.typ)
        if extra is not None:
            outputs |= extra(inputs, args.name)
        return resource_id, outputs

    def call(self, args: MockCallArgs) -> dict[str, Any]:
        self.recording.calls.append((args.token, dict(args.args)))
        if args.token not in self.call_results:
            raise KeyError(f"mock has no result for invoke {args.token}")
        result = self.call_results[args.token]
        # A callable answers from the invoke's arguments (offerings per instance type filter...).
        return dict(result(dict(args.args)) if callable(result) else result)


# How the Pulumi wire format marks a secret value (pulumi.runtime.rpc): {SIG_KEY: SECRET_SIG, "value": ...}.
_SIG_KEY = "4dabf18193072939515e22adb298388d"
_SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"


def _unwrap_secrets(value: Any) -> Any:
    """Replace wire-format secret wrappers by their plain value, recursively (so tests can search inputs)."""
    if isinstance(value, dict):
        if value.get(_SIG_KEY) == _SECRET_SIG:
            return _unwrap_secrets(value.get("value"))
        return {k: _unwrap_secrets(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unwrap_secrets(v) for v in value]
    return value


class _ErrorCollector:
    def __init__(self, recording: Recording) -> None:
        self.recording = recording

    def debug(self, *a: Any, **k: Any) -> None: ...
    def info(self, *a: Any, **k: Any) -> None: ...
    def warning(self, msg: str, *a: Any, **k: Any) -> None:
        self.recording.warnings.append(str(msg))

    def error(self, msg: str, *a: Any, **k: Any) -> None:
        self.recording.errors.append(str(msg))

    def exception(self, msg: str, *a: Any, **k: Any) -> None:
        self.recording.errors.append(str(msg))


def run_program(program: Callable[[], Mapping[str, Any]], *, call_results: Mapping[str, Any],
                computed: Computed | None = None, config: Mapping[str, str] | None = None,
                secret_keys: tuple[str, ...] = (), project: str = "infragen", stack: str = "test",
                preview: bool = False) -> Recording:
    """Run `program` (which returns the stack exports) under fresh mocks; returns what it created."""
    recording = Recording()
    mocks = RecordingMocks(recording, call_results, computed or {})
    pulumi.runtime.set_mocks(mocks, project=project, stack=stack, preview=preview,
                             logger=_ErrorCollector(recording))  # type: ignore[arg-type]
    pulumi.runtime.set_all_config(dict(config or {}), list(secret_keys))

    @pulumi.runtime.test
    def _run() -> pulumi.Output[Any]:
        def remember(args: pulumi.ResourceTransformationArgs) -> None:
            recording.options[(args.type_, args.name)] = args.opts

        pulumi.runtime.register_stack_transformation(remember)
        exports = program()
        return pulumi.Output.from_input(dict(exports)).apply(lambda resolved: recording.exports.update(resolved))

    _run()
    return recording
