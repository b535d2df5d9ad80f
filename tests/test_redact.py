"""``imagectl.redact``: every place a URL carries a secret is hidden."""

from __future__ import annotations

import pytest

from imagectl.redact import redact_url, scrub

SECRET = "s3cret-Pw-0xDEAD"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (f"postgresql+psycopg://admin:{SECRET}@db:5432/imagectl",
         "postgresql+psycopg://admin:***@db:5432/imagectl"),
        (f"postgresql://admin@db/x?sslmode=require&password={SECRET}&sslpassword={SECRET}",
         "postgresql://admin@db/x?sslmode=require&password=***&sslpassword=***"),  # a role
        (f"https://{SECRET}@pypi.example/simple", "https://***@pypi.example/simple"),  # pip's
        (f"https://__token__:{SECRET}@pypi.example/simple/",
         "https://__token__:***@pypi.example/simple/"),
        (f"https://b.s3.amazonaws.com/k?X-Amz-Signature={SECRET}&X-Amz-Expires=60",
         "https://b.s3.amazonaws.com/k?X-Amz-Signature=***&X-Amz-Expires=60"),
        (f"https://a.blob.core.windows.net/c?sv=2022&sig={SECRET}",
         "https://a.blob.core.windows.net/c?sv=2022&sig=***"),
        (f"https://h/cb#access_token={SECRET}&state=1", "https://h/cb#access_token=***&state=1"),
        (f"postgresql+psycopg://admin:{SECRET}@x@[db/imagectl",  # does not parse
         "postgresql+psycopg://admin:***@[db/imagectl"),
        (f"postgresql://admin:pa/{SECRET}@db/x", "postgresql://admin:***@db/x"),  # '/' unescaped
        ("sqlite:////var/lib/a@b/catalog.db", "sqlite:////var/lib/a@b/catalog.db"),  # a path
        ("http://127.0.0.1:4566", "http://127.0.0.1:4566"),
    ],
)  # fmt: skip
def test_redact_url(url: str, shown: str) -> None:
    assert redact_url(url) == shown
    assert SECRET not in redact_url(url)


def test_scrub_removes_a_urls_secrets_from_a_tools_message() -> None:
    url = f"postgresql://admin:{SECRET}@db/x?sslpassword=kp-{SECRET}"
    told = (f'connection to "db" failed: password "{SECRET}" rejected; also tried '
            f"https://u:{SECRET}x@mirror/simple and sslpassword kp-{SECRET}")  # fmt: skip
    scrubbed = scrub(told, url)
    assert SECRET not in scrubbed and "https://u:***@mirror/simple" in scrubbed
