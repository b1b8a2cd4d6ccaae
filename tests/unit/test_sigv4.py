"""Growler's SigV4 (``app.storage_access.signing.SigV4``) signs exactly as minio's ``sign_v4_s3`` does.

The remote signer derives the signing key once per day and region and takes the request's
canonical path and query as they are; the signatures must still be minio's, byte for byte.
"""

from __future__ import annotations

from datetime import UTC, datetime
from urllib.parse import urlsplit

import pytest
from minio.credentials import Credentials
from minio.signer import sign_v4_s3

from app.storage_access.signing import SigV4

ACCESS, SECRET = "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
CASES = [
    ("GET", "http://127.0.0.1:8333/bucket/wh/ns/t/data/00000-0.parquet", "us-east-1", {}),
    ("HEAD", "http://127.0.0.1:8333/bucket/wh/ns/t/metadata/v1.json", "eu-west-3", {"range": ["bytes=0-9"]}),
    ("PUT", "https://bucket.s3.example.com/wh/a%20b/%C3%A9.parquet", "us-east-1", {"content-type": ["a  b "]}),
    ("POST", "http://127.0.0.1:8333/bucket/wh/ns/t/x?uploads=", "us-east-1", {"content-md5": ["abc=="]}),
    ("PUT", "http://127.0.0.1:8333/bucket/k?partNumber=2&uploadId=Z%2Fy", "us-east-1", {"x-amz-meta-a": ["1", "2"]}),
    ("GET", "http://127.0.0.1:8333/bucket?list-type=2&prefix=wh%2Fns%2Ft%2F", "ap-south-1", {}),
    ("POST", "http://127.0.0.1:8333/bucket?delete=", "us-east-1", {"content-md5": ["x"]}),
]


@pytest.mark.parametrize(("method", "uri", "region", "extra"), CASES)
@pytest.mark.parametrize("when", [datetime(2026, 11, 24, 5, 6, 7, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC)])
def test_signatures_are_minios(method, uri, region, extra, when):
    url = urlsplit(uri)
    amz_date = when.strftime("%Y%m%dT%H%M%SZ")
    headers = {"host": url.netloc, "x-amz-content-sha256": "UNSIGNED-PAYLOAD", "x-amz-date": amz_date, **extra}
    expected = sign_v4_s3(
        method=method,
        url=url,
        region=region,
        headers=dict(headers),
        credentials=Credentials(ACCESS, SECRET),
        content_sha256="UNSIGNED-PAYLOAD",
        date=when,
    )["Authorization"]
    signer = SigV4(ACCESS, SECRET)
    for _ in range(2):  # the second time with the cached signing key
        got = signer.authorization(method, url.path, url.query, region, headers, "UNSIGNED-PAYLOAD", amz_date)
        assert got == expected
