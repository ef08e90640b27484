"""One verifying TLS context, shared by every SDK client of the process."""

from __future__ import annotations

import ssl

from voice_membrane.vendors.openai_client import async_client
from voice_membrane.vendors.tls import shared_ssl_context


def test_the_shared_context_verifies_certificates_and_host_names() -> None:
    context = shared_ssl_context()
    assert context is shared_ssl_context()
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert context.cert_store_stats()["x509_ca"] > 0  # a CA bundle is loaded


def test_a_new_client_does_not_load_the_ca_bundle_again() -> None:
    async_client("k", "http://127.0.0.1:9/v1", 10)
    loads = 0
    real = ssl.SSLContext.load_verify_locations

    def counting(self: ssl.SSLContext, *args: object, **kwargs: object) -> None:
        nonlocal loads
        loads += 1
        real(self, *args, **kwargs)  # type: ignore[arg-type]

    ssl.SSLContext.load_verify_locations = counting  # type: ignore[method-assign]
    try:
        async_client("k", "http://127.0.0.1:9/v1", 10)
    finally:
        ssl.SSLContext.load_verify_locations = real  # type: ignore[method-assign]
    assert loads == 0
