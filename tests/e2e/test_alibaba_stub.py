"""The Alibaba stand-in (tests/e2e/alibaba.py) accepts what Alibaba's own SDKs sent it and refuses the same
requests with one thing changed, so the Alibaba end-to-end boot cannot pass when the script asks for the wrong
secret, bucket or key, or signs with other credentials. Fast; runs in the default suite (no SDK needed: the
requests were recorded from the SDKs, fixtures/alibaba-sdk-requests.json)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from copy import deepcopy
from datetime import UTC, datetime
from hashlib import sha256
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.alibaba import (
    ACCESS_KEY_ID,
    ACCESS_KEY_SECRET,
    ROLE,
    SECURITY_TOKEN,
    Refused,
    Request,
    alibaba_cloud,
    crc64_ecma,
    verify_acs3,
    verify_oss4,
)

RECORDED = json.loads((Path(__file__).parent / "fixtures" / "alibaba-sdk-requests.json").read_text())["requests"]
CREDS = {"access_key_id": ACCESS_KEY_ID, "secret": ACCESS_KEY_SECRET, "token": SECURITY_TOKEN}


def _request(service: str, method: str = "POST", **change: Any) -> tuple[Request, datetime]:
    raw = deepcopy(next(r for r in RECORDED if r["service"] == service and r["method"] == method))
    for key, value in change.items():
        if key in ("path", "query", "body"):
            raw[key] = value
        else:
            raw["headers"][key.replace("_", "-")] = value
    headers = raw["headers"]
    stamp = headers.get("x-acs-date") or headers["x-oss-date"]
    fmt = "%Y-%m-%dT%H:%M:%SZ" if "x-acs-date" in headers else "%Y%m%dT%H%M%SZ"
    when = datetime.strptime(stamp, fmt).replace(tzinfo=UTC)
    return Request(raw["method"], raw["host"], raw["path"], raw["query"], headers, raw["body"].encode()), when


def _oss(req: Request, when: datetime, *, region: str = "cn-hangzhou", **creds: str) -> None:
    bucket, _, key = req.path.lstrip("/").replace("%2F", "/").partition("/")
    verify_oss4(req, bucket, key, region=region, now=when, **{**CREDS, **creds})


def test_what_the_sdks_sent_verifies() -> None:
    req, when = _request("kms")
    verify_acs3(req, now=when, **CREDS)
    assert req.query == "SecretName=infragen%2Fe2e-tiny%2Fapi-key" and not req.body  # V3 RPC: in the query
    for method in ("HEAD", "GET"):
        _oss(*_request("oss", method))


@pytest.mark.parametrize(("change", "code"), [
    ({"query": "SecretName=infragen%2Fother%2Fapi-key"}, "SignatureDoesNotMatch"),
    ({"body": "SecretName=infragen%2Fother%2Fapi-key"}, "InvalidPayload"),
    ({"x_acs_action": "GetSecretValueV2"}, "SignatureDoesNotMatch"),
    ({"x_acs_security_token": "another-token"}, "InvalidSecurityToken.Mismatch"),
    ({"authorization": "ACS3-HMAC-SHA256 Credential=STS.other,SignedHeaders=host,Signature=00"},
     "InvalidAccessKeyId.NotFound"),
])
def test_a_changed_kms_request_is_refused(change: dict[str, str], code: str) -> None:
    req, when = _request("kms", **change)
    with pytest.raises(Refused) as refused:
        verify_acs3(req, now=when, **CREDS)
    assert refused.value.code == code


def test_a_kms_request_signed_with_another_secret_or_too_late_is_refused() -> None:
    req, when = _request("kms")
    with pytest.raises(Refused, match="SignatureDoesNotMatch"):
        verify_acs3(req, now=when, **{**CREDS, "secret": "another-secret"})
    with pytest.raises(Refused, match="Expired"):
        verify_acs3(req, now=datetime(2000, 1, 1, tzinfo=UTC), **CREDS)


@pytest.mark.parametrize("change", [
    {"path": "/infragen-e2e/models%2Fother.gguf"},
    {"path": "/another-bucket/models%2Ftiny-q8_0.gguf"},
    {"x_oss_content_sha256": sha256(b"").hexdigest()},
])
def test_an_oss_read_of_another_object_or_payload_is_refused(change: dict[str, str]) -> None:
    with pytest.raises(Refused, match="SignatureDoesNotMatch"):
        _oss(*_request("oss", "GET", **change))


def test_an_oss_read_with_other_credentials_or_region_is_refused() -> None:
    req, when = _request("oss", "GET")
    with pytest.raises(Refused, match="SignatureDoesNotMatch"):
        _oss(req, when, secret="another-secret")
    with pytest.raises(Refused, match="scope"):
        _oss(req, when, region="cn-beijing")
    with pytest.raises(Refused, match="InvalidSecurityToken"):
        _oss(req, when, token="another-token")
    with pytest.raises(Refused, match="InvalidAccessKeyId"):
        _oss(req, when, access_key_id="STS.other")


def test_crc64_is_the_ecma_182_check_value() -> None:
    assert crc64_ecma(b"123456789") == 0x995DC9BBDF1939FA  # CRC-64/XZ's catalogued check value


def test_metadata_needs_the_hardened_mode_token_and_names_the_role() -> None:
    with alibaba_cloud("cn-hangzhou") as cloud:
        proxy = urllib.request.build_opener(urllib.request.ProxyHandler({"http": cloud.url}))
        base = "http://100.100.100.200/latest"
        with pytest.raises(urllib.error.HTTPError) as refused:
            proxy.open(f"{base}/meta-data/ram/security-credentials/", timeout=10)
        assert refused.value.code == 403
        put = urllib.request.Request(f"{base}/api/token", method="PUT",
                                     headers={"X-aliyun-ecs-metadata-token-ttl-seconds": "21600"})
        token = proxy.open(put, timeout=10).read().decode()
        read = urllib.request.Request(f"{base}/meta-data/ram/security-credentials/{ROLE}",
                                      headers={"X-aliyun-ecs-metadata-token": token})
        creds = json.loads(proxy.open(read, timeout=10).read())
        assert creds["AccessKeyId"] == ACCESS_KEY_ID and creds["SecurityToken"] == SECURITY_TOKEN
        assert creds["Code"] == "Success"
        # The metadata host reached directly (not through the proxy) is a wrong call, refused and recorded.
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(urllib.request.Request(cloud.url + "/latest/api/token", method="PUT",
                                                          headers={"Host": "100.100.100.200"}), timeout=10)
        assert len(cloud.refused) == 2


def test_the_rendered_secret_read_passes_the_stand_in_with_the_real_sdk(tmp_path: Path) -> None:
    # The dev extra installs the KMS SDK the node pins (alibabacloud_kms20160120==3.3.1): live, not recorded.
    pytest.importorskip("alibabacloud_kms20160120", reason="the dev extra installs it")
    import yaml

    from infragen.render import render_user_data
    from tests.plan_factory import make_plan

    text = render_user_data(make_plan("single", "alicloud"), "replica")
    helper = next(f["content"] for f in yaml.safe_load(text)["write_files"] if f["path"].endswith("alicloud.py"))
    (tmp_path / "alicloud.py").write_text(helper)
    with alibaba_cloud("cn-hangzhou") as cloud:
        cloud.secrets["infragen/x/api-key"] = "sk-live"
        env = {"PATH": os.environ["PATH"], "HTTP_PROXY": cloud.url, "NO_PROXY": "127.0.0.1",
               "INFRAGEN_ALICLOUD_ENDPOINT_URL": cloud.url}
        result = subprocess.run([sys.executable, str(tmp_path / "alicloud.py"), "secret", "infragen/x/api-key",
                                 "cn-hangzhou"], capture_output=True, text=True, env=env, timeout=120)
        assert (result.returncode, result.stdout, cloud.refused) == (0, "sk-live", []), result.stderr
        assert "kms GetSecretValue infragen/x/api-key" in cloud.requests
        assert cloud.requests[0] == "metadata PUT /latest/api/token"
        cloud.secrets.clear()  # the wrong name: KMS answers 404 and the helper fails
        result = subprocess.run([sys.executable, str(tmp_path / "alicloud.py"), "secret", "infragen/x/api-key",
                                 "cn-hangzhou"], capture_output=True, text=True, env=env, timeout=120)
        assert result.returncode != 0 and "Forbidden.ResourceNotFound" in result.stderr
