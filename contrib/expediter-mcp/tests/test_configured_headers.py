"""Headers in an ``mcp`` instance's configuration: a credential is never kept in the plain
``headers`` field (stored and listed in clear), and a header the client frames the request with
(``Host``, ``Transfer-Encoding``...) is refused in either field, when stored and when a stored
one is loaded, never sent."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from expediter_mcp.config import FRAMING_HEADERS, headers_of

from expediter.errors import ConfigError


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.parametrize("name", ["Authorization", "X-Api-Key", "x-auth-token", "Cookie"])
def test_a_credential_in_the_plain_headers_is_refused_naming_the_secret_field(
    host: Any, add_instance: Any, http_server: Any, name: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        add_instance(http_server.url, headers={name: "s3cret-0123456789"})
    assert "secret_headers" in str(caught.value)
    assert "s3cret-0123456789" not in str(caught.value)
    assert host.instances.list() == []
    record = add_instance(http_server.url, headers={"X-Tenant": "t1"})
    with pytest.raises(ConfigError):
        host.instances.update(record.id, config={"headers": {name: "s3cret-0123456789"}})


@pytest.mark.parametrize("name", [*FRAMING_HEADERS, "host", "TRANSFER-ENCODING"])
@pytest.mark.parametrize("field", ["headers", "secret_headers"])
def test_a_framing_header_is_refused_in_either_field(
    host: Any, add_instance: Any, http_server: Any, name: str, field: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        add_instance(http_server.url, **{field: {name: "x"}})
    assert field in str(caught.value)
    with pytest.raises(ConfigError, match="frames the request"):
        headers_of({field: {name: "x"}}, field)  # how a row stored before is read


def test_plain_and_secret_headers_that_are_allowed_are_sent(
    host: Any, add_instance: Any, http_server: Any
) -> None:
    record = add_instance(
        http_server.url,
        headers={"X-Tenant": "tenant-one"},
        secret_headers={"Authorization": "Bearer tok-0123456789"},
    )
    tenant = host.call(record.id, "header", {"name": "X-Tenant"})
    assert tenant.result["structured_content"]["sha256"] == _sha("tenant-one"), tenant.error
    auth = host.call(record.id, "header", {"name": "Authorization"})
    assert auth.result["structured_content"]["sha256"] == _sha("Bearer tok-0123456789")
    (listed,) = host.instances.list()
    assert "tok-0123456789" not in repr(listed)
