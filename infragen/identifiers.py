"""Character sets for every user-controlled string that reaches a script, unit, tag, path or resource name.

One gate, used by the workload spec (when a file is read) and by the plan (when a plan file is loaded), so an
edited plan is held to the same rules as a workload. Rendering still quotes everything; these sets make sure a
value means only what it looks like (no `$()`, no `--flag`, no `../`). Imports only pydantic.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic_core import PydanticCustomError, core_schema

#: Longest piece of a value echoed in an error (the rest is elided; never the full repr of a huge input).
SHOWN_CHARS = 40


def shown(value: object, limit: int = SHOWN_CHARS) -> str:
    """`repr` of at most `limit` characters of `value`, without building the repr of the whole thing."""
    if isinstance(value, str):
        return repr(value[:limit]) + ("..." if len(value) > limit else "")
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**limit:
        return f"an integer of {len(str(abs(value))) if abs(value).bit_length() < 20000 else 'thousands of'} digits"
    if isinstance(value, dict | list | tuple | set):
        return f"a {type(value).__name__} of {len(value)} items"
    text = repr(value)
    return text[:limit] + ("..." if len(text) > limit else "")


@dataclass(frozen=True)
class _Gate:
    """Pydantic metadata: refuse a string outside `pattern` (a friendly message), and say so in the JSON Schema."""

    kind: str
    pattern: str
    rule: str

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        regex = re.compile(self.pattern)

        def check(value: str) -> str:
            if not regex.fullmatch(value):
                raise PydanticCustomError("charset", "{value} is not a valid {kind}: {rule}",
                                          {"value": shown(value), "kind": self.kind, "rule": self.rule})
            return value

        return core_schema.no_info_after_validator_function(check, handler(source))

    def __get_pydantic_json_schema__(self, schema: core_schema.CoreSchema,
                                     handler: GetJsonSchemaHandler) -> dict[str, Any]:
        out: dict[str, Any] = handler(schema)
        out["pattern"] = f"^(?:{self.pattern})$"
        return out


def _gate(kind: str, pattern: str, rule: str) -> _Gate:
    return _Gate(kind, pattern, rule)


_NAME_RULE = "letters, digits, '.', '_' and '-', starting with a letter or digit"
#: Workload name: resource, tag and secret names derive from it.
WORKLOAD_NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}"
WorkloadName = Annotated[str, _gate("workload name", WORKLOAD_NAME_PATTERN, _NAME_RULE + ", at most 63")]
#: Model id and served model name: a path component on the node and the OpenAI `model` field.
ModelId = Annotated[str, _gate("model id", r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}", _NAME_RULE + ", at most 96")]
#: Region id (`us-east-1`, `cn-hangzhou`).
RegionId = Annotated[str, _gate("region", r"[a-z]{2}(?:-[a-z0-9]+){1,4}", "lower-case words joined by '-' "
                                "(us-east-1, cn-hangzhou)")]
#: Instance type (`g6e.xlarge`, `ecs.gn7i-c8g1.2xlarge`) or family (`g6e`, `ecs.gn7i`).
InstanceType = Annotated[str, _gate("instance type", r"[a-z0-9][a-z0-9.-]{0,63}",
                                    "lower-case letters, digits, '.' and '-' (g6e.xlarge, ecs.gn7i)")]
#: Catalog id of a GPU or CPU (`l40s-48gb`).
CatalogId = Annotated[str, _gate("catalog id", r"[a-z0-9][a-z0-9._-]{0,63}", "lower-case " + _NAME_RULE)]
#: Engine version: a PyPI version (`0.7.3`) or a llama.cpp release tag (`b4600`).
EngineVersion = Annotated[str, _gate("engine version", r"[A-Za-z0-9][A-Za-z0-9.+_-]{0,31}",
                                     "a release such as 0.7.3 or b4600")]
#: Secret name in Secrets Manager / KMS (`infragen/team-chatbot/api-key`).
SecretName = Annotated[str, _gate("secret name", r"[A-Za-z0-9][A-Za-z0-9/_+=.@-]{0,127}",
                                  "letters, digits and /_+=.@-, at most 128")]
#: A single file name (no directory part): the GGUF file in a repo or prefix.
FileName = Annotated[str, _gate("file name", r"[A-Za-z0-9][A-Za-z0-9._+-]{0,199}",
                                "one file name (" + _NAME_RULE + "), no directory part")]
#: Absolute path on the node made of plain components (no `..`, no spaces).
NodePath = Annotated[str, _gate("node path", r"(?:/[A-Za-z0-9_][A-Za-z0-9._-]{0,63}){1,8}",
                                "an absolute path of plain components (letters, digits, '.', '_', '-')")]
#: HTTP path the load balancer checks (`/health`).
UrlPath = Annotated[str, _gate("URL path", r"/[A-Za-z0-9._/-]{0,63}", "'/' then letters, digits, '.', '_', '/', '-'")]
#: One word of the engine command line: no shell or systemd metacharacters besides JSON's `{}":,[]`.
ArgvWord = Annotated[str, _gate("engine argument", r'[A-Za-z0-9@+=:,./_{}"\[\]-]{1,1024}',
                                "letters, digits and @+=:,./_-{}\"[] (no spaces, quotes only inside JSON)")]
#: A machine-option compiler flag a source-built engine is compiled with (`-mno-amx-tile`).
COMPILER_FLAG_PATTERN = r"-m(?:no-)?[a-z0-9][a-z0-9-]{0,31}"
CompilerFlag = Annotated[str, _gate("compiler flag", COMPILER_FLAG_PATTERN, "a machine option such as -mno-amx-tile "
                                    "(-m or -mno- then lower-case letters, digits and '-')")]
#: Environment variable name and value for the engine (NCCL/EFA settings).
EnvName = Annotated[str, _gate("environment variable name", r"[A-Z_][A-Z0-9_]{0,63}", "upper-case letters, "
                               "digits and '_'")]
EnvValue = Annotated[str, _gate("environment value", r"[A-Za-z0-9 ._,:/=+-]{0,256}",
                                "letters, digits, spaces and ._,:/=+- (NCCL_NET=AWS Libfabric)")]
#: Short free text shown to people only (display names, reasons): any printable text, bounded.
Text = Annotated[str, _gate("text", r"[^\x00-\x1f\x7f]{0,2000}", "printable text of at most 2000 characters")]
#: An http(s) base URL (PyPI mirror, HF_ENDPOINT): a host, an optional port and a plain path; nothing a shell,
#: unit file or pip would interpret.
HTTP_URL_PATTERN = r"https?://[A-Za-z0-9.-]{1,253}(?::[0-9]{1,5})?(?:/[A-Za-z0-9._~/-]{0,200})?"
HttpUrl = Annotated[str, _gate("URL", HTTP_URL_PATTERN, "an http(s) base URL such as https://mirror.example/simple")]
#: A host name (pip's --trusted-host).
HostName = Annotated[str, _gate("host name", r"[A-Za-z0-9][A-Za-z0-9.-]{0,252}(?::[0-9]{1,5})?",
                                "a host name such as mirrors.example.com")]
#: A dotted release number (driver, CUDA, cuDNN versions).
ReleaseNumber = Annotated[str, _gate("release number", r"[0-9][0-9A-Za-z.+_-]{0,31}", "digits and dots (550.127.08)")]
#: infragen's own version string.
Version = Annotated[str, _gate("version", r"[A-Za-z0-9][A-Za-z0-9.+_-]{0,39}", "a version such as 0.1.0")]

#: IANA time zone name (`UTC`, `Europe/Berlin`, `America/Argentina/Buenos_Aires`); it reaches scheduled scaling
#: actions, so it is held to the tz database's own character set.
TIME_ZONE_PATTERN = r"[A-Za-z][A-Za-z0-9_+-]{0,31}(?:/[A-Za-z0-9_+-]{1,31}){0,2}"
TimeZoneName = Annotated[str, _gate("time zone", TIME_ZONE_PATTERN,
                                    "an IANA time zone name such as UTC or Europe/Berlin")]

#: Bucket names: S3 (3-63 lower-case letters, digits, '.', '-') and OSS (no '.'), per each cloud's naming rules.
_BUCKET = r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]"
#: Object key prefix: plain components, no `..`, no wildcards.
_PREFIX = r"(?:/(?!\.\.?(?:/|$))[A-Za-z0-9._-]{1,255}){1,16}/?"
#: Hugging Face repo id `org/name` (the Hub's rules: letters, digits, '.', '_', '-'; no leading '-' or '.').
_HF_REPO = r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}"
HF_REPO_RE = re.compile(_HF_REPO)
OBJECT_URI_RE = re.compile(rf"(s3|oss)://({_BUCKET})({_PREFIX})")
#: What a workload's `weights` may be: `org/name`, `org/name/file.gguf` (either on ModelScope with `modelscope://`
#: first), or `s3://` / `oss://` bucket + prefix.
WEIGHTS_RE = re.compile(rf"(?:modelscope://)?{_HF_REPO}(?:/[A-Za-z0-9][A-Za-z0-9._+-]{{0,199}}\.gguf)?|(?:s3|oss)://{_BUCKET}{_PREFIX}")
#: A plan's weights_uri: the repo or the bucket + prefix (the GGUF file is in weights_file).
WeightsUri = Annotated[str, _gate("weights URI", rf"{_HF_REPO}|(?:s3|oss)://{_BUCKET}{_PREFIX}",
                                  "a Hugging Face repo id org/name, or s3:// / oss:// with a concrete bucket "
                                  "and prefix (no wildcards, no '..')")]
