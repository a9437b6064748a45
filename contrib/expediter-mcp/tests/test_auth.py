"""Static credentials against a fastmcp server with bearer tokens, over streamable HTTP and SSE:
a wrong token is a clear error, a rotated token takes effect, and two users with different
tokens never share a session (the server says who called)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import expediter


@pytest.fixture(params=["http", "sse"])
def server(request: pytest.FixtureRequest, token_server: Any, sse_server: Any) -> Any:
    return token_server if request.param == "http" else sse_server


def _transport(server: Any) -> str:
    return "sse" if server.url.endswith("/sse") else "http"


def test_the_right_token_is_who_calls(host: Any, add_instance: Any, server: Any) -> None:
    record = add_instance(
        server.url, transport=_transport(server), auth="bearer", token="token-ann"
    )
    event = host.call(record.id, "whoami", {})
    assert event.status == "completed", event.error
    assert event.result["structured_content"]["client"] == "ann"


def test_a_wrong_token_is_a_clear_error(host: Any, add_instance: Any, server: Any) -> None:
    record = add_instance(server.url, transport=_transport(server), auth="bearer", token="nope")
    event = host.call(record.id, "whoami", {})
    assert event.status == "error"
    assert "refused the credentials (HTTP 401)" in event.error
    assert f"expediter instances set {record.id} --secret token=" in event.error
    assert "nope" not in event.error


def test_no_token_for_a_server_that_wants_one(
    host: Any, add_instance: Any, token_server: Any
) -> None:
    record = add_instance(token_server.url)
    event = host.call(record.id, "whoami", {})
    assert event.status == "error"
    assert "the server wants credentials" in event.error


def test_a_rotated_token_takes_effect(host: Any, add_instance: Any, server: Any) -> None:
    record = add_instance(
        server.url, transport=_transport(server), auth="bearer", token="token-ann"
    )
    assert host.call(record.id, "whoami", {}).result["structured_content"]["client"] == "ann"
    host.instances.update(record.id, config={"token": "token-bob"})
    event = host.call(record.id, "whoami", {})
    assert event.status == "completed", event.error
    assert event.result["structured_content"]["client"] == "bob"


def test_two_users_with_their_own_tokens_never_share_a_session(
    host: Any, add_instance: Any, token_server: Any
) -> None:
    ann = add_instance(
        token_server.url, name="mine", user_id="ann", auth="bearer", token="token-ann"
    )
    bob = add_instance(
        token_server.url, name="mine", user_id="bob", auth="bearer", token="token-bob"
    )
    seen = {}
    for _ in range(2):
        for user, record in (("ann", ann), ("bob", bob)):
            event = host.call(record.id, "whoami", {}, user_id=user)
            assert event.status == "completed", event.error
            seen.setdefault(user, set()).add(
                (
                    event.result["structured_content"]["client"],
                    event.result["structured_content"]["port"],
                )
            )
    ((ann_client, ann_port),) = seen["ann"]
    ((bob_client, bob_port),) = seen["bob"]
    assert (ann_client, bob_client) == ("ann", "bob")
    assert ann_port != bob_port  # separate sessions, separate connections


def test_arun_and_run_share_the_sessions_of_the_hosts_loop(
    host: Any, add_instance: Any, http_server: Any
) -> None:
    record = add_instance(http_server.url)
    toolset = host.toolset()
    name = next(
        o.name for o in toolset.actions if o.instance_id == record.id and o.action.name == "whoami"
    )

    async def twice() -> list[Any]:
        found = []
        for index in range(2):
            call = expediter.ToolCall(
                call_id=f"c{index}",
                name=name,
                arguments={},
                instance_id=record.id,
                tool="mcp",
                action="whoami",
            )
            async for event in toolset.arun([call], message_id=f"m-{id(found)}-{index}"):
                found.append(event)
        return found

    first = asyncio.run(twice())
    second = asyncio.run(twice())
    assert all(e.status == "completed" for e in first + second), [
        (e.call_id, e.name, e.error) for e in first + second
    ]
    ports = [[e.result["structured_content"]["port"] for e in run] for run in (first, second)]
    # Async tools run on the host's loop whichever loop calls: one session for every call,
    # the sync path's included.
    assert ports[0] == ports[1] == [ports[0][0]] * 2
    (event,) = toolset.run(
        [
            expediter.ToolCall(
                call_id="s",
                name=name,
                arguments={},
                instance_id=record.id,
                tool="mcp",
                action="whoami",
            )
        ],
        message_id="m-sync",
    )
    assert event.result["structured_content"]["port"] == ports[0][0]


def _sha(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()


def test_an_api_key_goes_in_its_header_and_never_back_to_the_model(
    host: Any, add_instance: Any, http_server: Any
) -> None:
    record = add_instance(
        http_server.url, auth="api_key", api_key="key-0123456789", header_name="X-Shop-Key"
    )
    event = host.call(record.id, "header", {"name": "X-Shop-Key"})
    assert event.status == "completed", event.error
    seen = event.result["structured_content"]
    assert seen["sha256"] == _sha("key-0123456789")  # the server got it
    assert "key-0123456789" not in str(event.result)  # the echo is hidden from the model
    row = host.ledger.get(event.key)
    assert "key-0123456789" not in str(row)


def test_basic_credentials_and_secret_headers(
    host: Any, add_instance: Any, http_server: Any
) -> None:
    import base64

    record = add_instance(
        http_server.url,
        auth="basic",
        username="ann",
        password="pw-0123456789",
        secret_headers={"X-Tenant-Secret": "tenant-0123456789"},
    )
    basic = host.call(record.id, "header", {"name": "Authorization"})
    expected = "Basic " + base64.b64encode(b"ann:pw-0123456789").decode()
    assert basic.result["structured_content"]["sha256"] == _sha(expected)
    assert expected.split()[1] not in str(basic.result)  # the derived token is hidden too
    tenant = host.call(record.id, "header", {"name": "X-Tenant-Secret"})
    assert tenant.result["structured_content"]["sha256"] == _sha("tenant-0123456789")
    assert "tenant-0123456789" not in str(tenant.result)


def test_a_missing_credential_names_the_field(
    host: Any, add_instance: Any, http_server: Any
) -> None:
    record = add_instance(http_server.url, auth="bearer")
    event = host.call(record.id, "whoami", {})
    assert event.status == "error"
    assert "needs the secret 'token'" in event.error


class Vault:
    """A ``resolve_secret`` provider that gives each user their own token."""

    tokens: dict[str | None, str] = {"ann": "token-ann", "bob": "token-bob"}

    @expediter.hookimpl
    def resolve_secret(self, name: str, context: expediter.CallContext) -> str | None:
        return self.tokens.get(context.user_id) if name == "token" else None


def test_one_instance_with_per_user_secrets_never_shares_a_session(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, token_server: Any
) -> None:
    from expediter.core.instances.keys import generate_key

    monkeypatch.setenv("EXPEDITER_SECRET_KEYS", generate_key())
    monkeypatch.setenv("EXPEDITER_LOAD_PLUGINS", "mcp")
    shared = expediter.Host(home=tmp_path, plugins=[Vault()])
    record = shared.instances.add(
        "mcp",
        name="shared",
        config={"url": token_server.url, "auth": "bearer", "allow_networks": ["127.0.0.0/8"]},
        operator=True,
    )
    try:
        for user in ("ann", "bob", "ann", "bob"):
            event = shared.call(record.id, "whoami", {}, user_id=user)
            assert event.status == "completed", event.error
            assert event.result["structured_content"]["client"] == user
    finally:
        shared.close()
