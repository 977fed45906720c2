"""The Alibaba Cloud a node talks to, on 127.0.0.1: one small HTTP server standing in for the ECS metadata service
(security hardening mode: token first, then the RAM role's STS credentials), KMS GetSecretValue and OSS
HeadObject/GetObject. No emulator of KMS or OSS exists on the package registries (checked), so the answers are
the documented response shapes, and every request is VERIFIED the way the services verify it, so the end-to-end
test fails when the boot script calls the wrong thing:

- metadata (https://www.alibabacloud.com/help/en/ecs/user-guide/view-instance-metadata): reached as an HTTP proxy
  for host 100.100.100.200 (the request line names the real host); PUT /latest/api/token needs
  X-aliyun-ecs-metadata-token-ttl-seconds in 1..21600; every GET without the token is refused (hardened only).
- KMS (https://www.alibabacloud.com/help/en/kms/key-management-service/developer-reference/api-getsecretvalue),
  signed with V3 (https://www.alibabacloud.com/help/en/sdk/product-overview/v3-request-structure-and-signature):
  ACS3-HMAC-SHA256 recomputed from the signed headers with the STS secret the metadata handed out, the payload
  hash, x-acs-security-token, the action and API version, and the secret name.
- OSS, signed with V4 (https://www.alibabacloud.com/help/en/oss/developer-reference/recommend-to-use-signature-version-4):
  OSS4-HMAC-SHA256 recomputed (scope date/region/oss/aliyun_v4_request), x-oss-security-token, the bucket and
  the key; objects come back with the headers GetObject documents, including x-oss-hash-crc64ecma, which the
  SDK checks against what it received.
What it does not do: TLS (the node's clients talk plain HTTP to it: INFRAGEN_ALICLOUD_ENDPOINT_URL), RAM policy
evaluation, KMS encryption, OSS listing, ranges and multipart, throttling and errors other than refusals.
"""

from __future__ import annotations

import hashlib
import hmac
import http.server
import json
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import formatdate
from urllib.parse import parse_qsl, quote, unquote, urlsplit

METADATA_HOST = "100.100.100.200"
ROLE = "infragen-e2e-node-role"
#: The STS credentials the metadata stub hands out (never real ones).
ACCESS_KEY_ID = "STS.e2eINFRAGENnode0001"
ACCESS_KEY_SECRET = "e2e-sts-access-key-secret-not-real"
SECURITY_TOKEN = "e2e-sts-security-token-not-real"
#: Both services refuse a request dated further than this from their clock (V3 and OSS V4 docs: 15 minutes).
_SKEW = timedelta(minutes=15)
_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~")


def _crc64_table() -> list[int]:
    table = []
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = (crc >> 1) ^ 0xC96C5795D7870F42 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_CRC64 = _crc64_table()


def crc64_ecma(data: bytes) -> int:
    """CRC-64/XZ (ECMA-182 polynomial, reflected, all ones in and out): OSS's x-oss-hash-crc64ecma."""
    crc = 0xFFFFFFFFFFFFFFFF
    table = _CRC64
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFFFFFFFFFF


def _sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def _oss_encode(text: str, *, keep_slash: bool) -> str:
    """OSS V4's URI encoding: every byte but A-Z a-z 0-9 - _ . ~ (and / in the canonical URI) as %XX."""
    return "".join(chr(b) if b in _UNRESERVED or (keep_slash and b == 0x2F) else f"%{b:02X}"
                   for b in text.encode())


def _fields(authorization: str, scheme: str) -> dict[str, str]:
    """`SCHEME K=V, K=V` (commas with or without spaces) as a dict; empty when the scheme differs."""
    if not authorization.startswith(scheme + " "):
        return {}
    parts = (p.strip() for p in authorization[len(scheme) + 1:].split(","))
    return {k: v for k, _, v in (p.partition("=") for p in parts)}


def _within_skew(when: datetime, now: datetime | None) -> bool:
    return abs((now or datetime.now(UTC)) - when) <= _SKEW


class Refused(Exception):
    """A request the real service would refuse: (HTTP status, error code, why)."""

    def __init__(self, status: int, code: str, why: str) -> None:
        super().__init__(f"{status} {code}: {why}")
        self.status, self.code, self.why = status, code, why


@dataclass
class Request:
    """What the stub parsed of one request (header names lower-cased)."""

    method: str
    host: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes


def verify_acs3(req: Request, *, access_key_id: str, secret: str, token: str, now: datetime | None = None) -> None:
    """V3 (ACS3-HMAC-SHA256) as the V3 signature doc defines it; raises Refused."""
    auth = _fields(req.headers.get("authorization", ""), "ACS3-HMAC-SHA256")
    if not auth:
        raise Refused(400, "IncompleteSignature", "no ACS3-HMAC-SHA256 Authorization header")
    if auth.get("Credential") != access_key_id:
        raise Refused(404, "InvalidAccessKeyId.NotFound", f"access key {auth.get('Credential')!r} is not the role's")
    if req.headers.get("x-acs-security-token") != token:
        raise Refused(400, "InvalidSecurityToken.Mismatch", "x-acs-security-token is not the role's STS token")
    signed = auth.get("SignedHeaders", "").split(";")
    for required in ("host", "x-acs-action", "x-acs-content-sha256", "x-acs-date", "x-acs-signature-nonce",
                     "x-acs-version", "x-acs-security-token"):
        if required not in signed:
            raise Refused(400, "IncompleteSignature", f"{required} is not signed")
    if signed != sorted(signed) or any(h not in req.headers for h in signed):
        raise Refused(400, "IncompleteSignature", f"SignedHeaders {signed} unsorted or not all sent")
    if req.headers["x-acs-content-sha256"] != _sha256_hex(req.body):
        raise Refused(400, "InvalidPayload", "x-acs-content-sha256 is not the SHA-256 of the body")
    try:
        when = datetime.strptime(req.headers["x-acs-date"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        raise Refused(400, "InvalidTimeStamp.Format", "x-acs-date is not yyyy-MM-ddTHH:mm:ssZ") from None
    if not _within_skew(when, now):
        raise Refused(400, "InvalidTimeStamp.Expired", "x-acs-date is more than 15 minutes off")
    query = "&".join(f"{quote(k, safe='~')}={quote(v, safe='~')}"
                     for k, v in sorted(parse_qsl(req.query, keep_blank_values=True)))
    headers = "".join(f"{h}:{req.headers[h].strip()}\n" for h in signed)
    canonical = "\n".join([req.method, req.path or "/", query, headers, ";".join(signed),
                           req.headers["x-acs-content-sha256"]])
    expected = hmac.new(secret.encode(), f"ACS3-HMAC-SHA256\n{_sha256_hex(canonical.encode())}".encode(),
                        hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, auth.get("Signature", "")):
        raise Refused(400, "SignatureDoesNotMatch", "the ACS3-HMAC-SHA256 signature does not match")


def verify_oss4(req: Request, bucket: str, key: str, *, region: str, access_key_id: str, secret: str,
                token: str, now: datetime | None = None) -> None:
    """OSS V4 (OSS4-HMAC-SHA256) as OSS's V4 signature doc defines it; raises Refused."""
    auth = _fields(req.headers.get("authorization", ""), "OSS4-HMAC-SHA256")
    if not auth:
        raise Refused(403, "AccessDenied", "no OSS4-HMAC-SHA256 Authorization header")
    ak, _, scope = auth.get("Credential", "").partition("/")
    if ak != access_key_id:
        raise Refused(403, "InvalidAccessKeyId", f"access key {ak!r} is not the role's")
    if req.headers.get("x-oss-security-token") != token:
        raise Refused(403, "InvalidSecurityToken", "x-oss-security-token is not the role's STS token")
    stamp = req.headers.get("x-oss-date", "")
    try:
        when = datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    except ValueError:
        raise Refused(403, "AccessDenied", "x-oss-date is not ISO 8601 basic") from None
    if not _within_skew(when, now):
        raise Refused(403, "RequestTimeTooSkewed", "x-oss-date is more than 15 minutes off")
    if scope != f"{stamp[:8]}/{region}/oss/aliyun_v4_request":
        raise Refused(403, "SignatureDoesNotMatch", f"scope {scope!r} is not {stamp[:8]}/{region}/oss/...")
    if "x-oss-content-sha256" not in req.headers:
        raise Refused(403, "AccessDenied", "x-oss-content-sha256 missing")
    additional = [h for h in auth.get("AdditionalHeaders", "").split(";") if h]
    headers = sorted((k, v.strip()) for k, v in req.headers.items()
                     if k.startswith("x-oss-") or k in ("content-type", "content-md5") or k in additional)
    query = "&".join(f"{k}={v}" if v else k for k, v in sorted(
        (_oss_encode(k, keep_slash=False), _oss_encode(v, keep_slash=False))
        for k, v in parse_qsl(req.query, keep_blank_values=True)))
    canonical = "\n".join([req.method, _oss_encode(f"/{bucket}/{key}", keep_slash=True), query,
                           "".join(f"{k}:{v}\n" for k, v in headers), ";".join(additional),
                           req.headers["x-oss-content-sha256"]])
    string_to_sign = f"OSS4-HMAC-SHA256\n{stamp}\n{scope}\n{_sha256_hex(canonical.encode())}"
    signing_key = b"aliyun_v4" + secret.encode()
    for part in (stamp[:8], region, "oss", "aliyun_v4_request"):
        signing_key = _hmac(signing_key, part)
    expected = hmac.new(signing_key, string_to_sign.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, auth.get("Signature", "")):
        raise Refused(403, "SignatureDoesNotMatch", "the OSS4-HMAC-SHA256 signature does not match")


@dataclass
class AlibabaCloud:
    """The stand-in's state: what it holds, what it was asked, what it refused."""

    region: str
    secrets: dict[str, str] = field(default_factory=dict)
    objects: dict[tuple[str, str], bytes] = field(default_factory=dict)
    url: str = ""
    """http://127.0.0.1:PORT: the endpoint for KMS and OSS, and the proxy for the metadata host."""
    requests: list[str] = field(default_factory=list)
    """One line per request: `metadata PUT /latest/api/token`, `kms GetSecretValue NAME`, `oss GET BUCKET/KEY`."""
    refused: list[str] = field(default_factory=list)
    """One line per refused request, with the reason (the e2e test requires none)."""
    metadata_token: str = field(default_factory=lambda: uuid.uuid4().hex)

    def put_object(self, bucket: str, key: str, data: bytes) -> None:
        self.objects[(bucket, key)] = data
        self._crc[(bucket, key)] = crc64_ecma(data)

    def __post_init__(self) -> None:
        self._crc: dict[tuple[str, str], int] = {}

    # --- the three services ----------------------------------------------------------------------------------

    def metadata(self, req: Request) -> tuple[int, dict[str, str], bytes]:
        self.requests.append(f"metadata {req.method} {req.path}")
        if req.method == "PUT" and req.path == "/latest/api/token":
            ttl = req.headers.get("x-aliyun-ecs-metadata-token-ttl-seconds", "")
            if not ttl.isdigit() or not 1 <= int(ttl) <= 21600:
                raise Refused(400, "MissingParameter", "X-aliyun-ecs-metadata-token-ttl-seconds not in 1..21600")
            return 200, {"Content-Type": "text/plain"}, self.metadata_token.encode()
        if req.headers.get("x-aliyun-ecs-metadata-token") != self.metadata_token:
            raise Refused(403, "Forbidden", "metadata read without the hardened-mode token")
        base = "/latest/meta-data/ram/security-credentials/"
        if req.method == "GET" and req.path == base:
            return 200, {"Content-Type": "text/plain"}, ROLE.encode()
        if req.method == "GET" and req.path == base + ROLE:
            now = datetime.now(UTC)
            body = {"AccessKeyId": ACCESS_KEY_ID, "AccessKeySecret": ACCESS_KEY_SECRET,
                    "Expiration": (now + timedelta(hours=6)).strftime("%Y-%m-%dT%H:%M:%SZ"),
                    "SecurityToken": SECURITY_TOKEN, "LastUpdated": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
                    "Code": "Success"}
            return 200, {"Content-Type": "application/json"}, json.dumps(body).encode()
        raise Refused(404, "NotFound", f"no metadata at {req.path}")

    def kms(self, req: Request) -> tuple[int, dict[str, str], bytes]:
        verify_acs3(req, access_key_id=ACCESS_KEY_ID, secret=ACCESS_KEY_SECRET, token=SECURITY_TOKEN)
        action, version = req.headers.get("x-acs-action"), req.headers.get("x-acs-version")
        if (action, version) != ("GetSecretValue", "2016-01-20"):
            raise Refused(400, "InvalidAction.NotFound", f"{action} {version} is not KMS GetSecretValue 2016-01-20")
        form = dict(parse_qsl(req.body.decode(), keep_blank_values=True)) | dict(parse_qsl(req.query))
        name = form.get("SecretName", "")
        self.requests.append(f"kms {action} {name}")
        if name not in self.secrets:
            raise Refused(404, "Forbidden.ResourceNotFound", f"no secret named {name!r}")
        body = {"RequestId": str(uuid.uuid4()), "SecretName": name, "SecretType": "Generic",
                "SecretData": self.secrets[name], "SecretDataType": "text",
                "VersionId": "00000000000000000000000000000001", "VersionStages": {"VersionStage": ["ACSCurrent"]},
                "CreateTime": "2026-01-01T00:00:00Z"}
        return 200, {"Content-Type": "application/json;charset=utf-8"}, json.dumps(body).encode()

    def oss(self, req: Request) -> tuple[int, dict[str, str], bytes]:
        bucket, _, key = unquote(req.path).lstrip("/").partition("/")
        verify_oss4(req, bucket, key, region=self.region, access_key_id=ACCESS_KEY_ID, secret=ACCESS_KEY_SECRET,
                    token=SECURITY_TOKEN)
        self.requests.append(f"oss {req.method} {bucket}/{key}")
        if req.method not in ("GET", "HEAD") or req.query or "range" in req.headers:
            raise Refused(400, "NotImplemented", f"{req.method} ?{req.query} is not a whole-object read")
        if (bucket, key) not in self.objects:
            raise Refused(404, "NoSuchKey", f"no object {key!r} in bucket {bucket!r}")
        data = self.objects[(bucket, key)]
        headers = {"Content-Type": "application/octet-stream", "Content-Length": str(len(data)),
                   "ETag": f'"{hashlib.md5(data).hexdigest().upper()}"', "Last-Modified": formatdate(usegmt=True),
                   "x-oss-object-type": "Normal", "x-oss-storage-class": "Standard",
                   "x-oss-hash-crc64ecma": str(self._crc[(bucket, key)])}
        return 200, headers, data


class _Handler(http.server.BaseHTTPRequestHandler):
    cloud: AlibabaCloud
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def _handle(self) -> None:
        parts = urlsplit(self.path)
        absolute = bool(parts.scheme)  # the request line of a proxied request names the host
        host = parts.netloc if absolute else self.headers.get("Host", "")
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        req = Request(self.command, host, parts.path, parts.query,
                      {k.lower(): v for k, v in self.headers.items()}, body)
        request_id = uuid.uuid4().hex.upper()
        try:
            if host == METADATA_HOST and absolute:
                status, headers, payload = self.cloud.metadata(req)
            elif host == METADATA_HOST or (absolute and host != urlsplit(self.cloud.url).netloc):
                raise Refused(400, "BadRequest", f"{host} reached the wrong way (absolute form: {absolute})")
            elif "x-acs-action" in req.headers:
                status, headers, payload = self.cloud.kms(req)
            else:
                status, headers, payload = self.cloud.oss(req)
        except Refused as refusal:
            self.cloud.refused.append(f"{self.command} {host}{parts.path}: {refusal}")
            status, headers = refusal.status, {"Content-Type": "application/json"}
            payload = json.dumps({"Code": refusal.code, "Message": refusal.why, "RequestId": request_id}).encode()
        headers.setdefault("Content-Length", str(len(payload)))
        self.send_response(status)
        for k, v in {**headers, "x-oss-request-id": request_id, "x-acs-request-id": request_id}.items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    do_GET = do_PUT = do_POST = do_HEAD = _handle


@contextmanager
def alibaba_cloud(region: str) -> Iterator[AlibabaCloud]:
    """The stand-in on 127.0.0.1 (a free port); yields its state, whose `url` is set."""
    cloud = AlibabaCloud(region=region)
    handler = type("Handler", (_Handler,), {"cloud": cloud})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    cloud.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield cloud
    finally:
        server.shutdown()
        server.server_close()
