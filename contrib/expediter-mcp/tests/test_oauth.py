"""OAuth for tool ``mcp``: ``expediter mcp login`` stores sealed tokens, calls use and refresh
them, and a call that needs a person fails at once saying how to re-authorize; machine access
with the client-credentials grant. Every server is a real one on 127.0.0.1."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
from expediter_mcp.oauth import ReauthorizeNeeded, TokenStore, oauth_for
from expediter_mcp.oauth.store import MemorySlots, slot_name
from expediter_mcp.operate import login
from expediter_mcp.tool import McpTool
from oauth_support import Browser, CredentialsServer, OAuthServer, act_on

import expediter


@pytest.fixture
def oauth_server() -> Iterator[OAuthServer]:
    running = OAuthServer()
    yield running
    running.close()


def _login(host: Any, instance_id: str, user_id: str | None, **options: Any) -> Browser:
    browser = options.pop("browser", None) or Browser()
    options.setdefault("timeout", 20.0)
    login(host, instance_id, user_id, port=0, show=browser.show, **options)
    browser.join()
    return browser


def _stored(host: Any, instance_id: str, user_id: str | None, slot: str) -> dict[str, Any]:
    found = host.instances.tokens(instance_id).get(user_id, slot)
    assert found is not None, f"no {slot!r} stored for {user_id!r}"
    return dict(found["value"])


def _client(event: Any) -> str:
    assert event.status == "completed", event.error
    return str(event.result["structured_content"]["client"])


def test_login_stores_sealed_tokens_that_later_calls_use(
    host: Any, add_instance: Any, oauth_server: OAuthServer, tmp_path: Path
) -> None:
    record = add_instance(oauth_server.url, auth="oauth")
    browser = _login(host, record.id, "ann")
    assert browser.responses[0].status_code == 200  # the callback page, after the redirect
    tokens = _stored(host, record.id, "ann", "token")
    assert tokens["access_token"] in oauth_server.provider.access_tokens
    # The raw rows hold sealed blobs only: no token, no client id in clear.
    with sqlite3.connect(tmp_path / "ledger.db") as db:
        rows = db.execute("SELECT user_id, name, data FROM oauth_tokens").fetchall()
    assert {(user, name) for user, name, _ in rows} >= {("ann", "token"), ("ann", "client_info")}
    client_id = _stored(host, record.id, "ann", "client_info")["client_id"]
    for _, _, data in rows:
        assert data.startswith("ex1.")
        for secret in (tokens["access_token"], tokens["refresh_token"], client_id, "test_"):
            assert secret not in data
    assert _client(host.call(record.id, "whoami", {}, user_id="ann")) == client_id


def test_login_through_the_cli_stores_tokens(
    host: Any, add_instance: Any, oauth_server: OAuthServer, tmp_path: Path
) -> None:
    record = add_instance(oauth_server.url, auth="oauth")
    env = {**os.environ, "EXPEDITER_DATABASE_URL": f"sqlite:///{tmp_path / 'ledger.db'}"}
    command = [sys.executable, "-m", "expediter", "mcp", "login", record.id, "--user", "ann"]
    process = subprocess.Popen(
        [*command, "--timeout", "30"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []

    def read() -> None:
        assert process.stdout is not None
        lines.extend(iter(process.stdout.readline, ""))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    browser = Browser()
    try:
        act_on(lambda: "".join(lines), browser)
        _, err = process.communicate(timeout=60)
    finally:
        process.kill()
    reader.join(5)
    assert process.returncode == 0, err
    assert "logged in" in err
    assert _client(host.call(record.id, "whoami", {}, user_id="ann"))


def test_invoker_tokens_serve_only_their_user(
    host: Any, add_instance: Any, oauth_server: OAuthServer
) -> None:
    record = add_instance(oauth_server.url, auth="oauth", token_scope="invoker")
    _login(host, record.id, "ann")
    started = time.monotonic()
    refused = host.call(record.id, "whoami", {}, user_id="bob")
    elapsed = time.monotonic() - started
    assert refused.status == "error"
    assert refused.error.startswith("the MCP server needs authorization")
    assert f"re-authorize with `expediter mcp login {record.id} --user bob`" in refused.error
    assert elapsed < 3.0
    assert _client(host.call(record.id, "whoami", {}, user_id="ann"))


def test_owner_tokens_serve_every_invoker(
    host: Any, add_instance: Any, oauth_server: OAuthServer
) -> None:
    record = add_instance(oauth_server.url, auth="oauth", token_scope="owner")
    _login(host, record.id, None)
    clients = {_client(host.call(record.id, "whoami", {}, user_id=who)) for who in ("ann", "bob")}
    assert len(clients) == 1


def test_an_expired_access_token_is_refreshed_and_stored(
    host: Any, add_instance: Any, oauth_server: OAuthServer
) -> None:
    record = add_instance(oauth_server.url, auth="oauth")
    _login(host, record.id, "ann")
    before = _stored(host, record.id, "ann", "token")
    _expire_locally(host, record.id, "ann")
    oauth_server.expire(before["access_token"])  # the server refuses it too
    assert _client(host.call(record.id, "whoami", {}, user_id="ann"))
    after = _stored(host, record.id, "ann", "token")
    assert after["access_token"] != before["access_token"]
    assert after["refresh_token"] != before["refresh_token"]  # rotated by the server
    assert after["access_token"] in oauth_server.provider.access_tokens


def _expire_locally(host: Any, instance_id: str, user_id: str) -> None:
    """Make the stored access token's expiry a past time (what a later call sees)."""
    tokens = host.instances.tokens(instance_id)
    entry = tokens.get(user_id, "token_expiry")
    entry["value"] = {"expires_at": time.time() - 60}
    tokens.put(user_id, entry, name="token_expiry")


def test_a_revoked_token_asks_to_re_authorize_at_once(
    host: Any, add_instance: Any, oauth_server: OAuthServer
) -> None:
    record = add_instance(oauth_server.url, auth="oauth")
    _login(host, record.id, "ann")
    oauth_server.revoke(_stored(host, record.id, "ann", "token")["access_token"])
    started = time.monotonic()
    event = host.call(record.id, "whoami", {}, user_id="ann")
    assert event.status == "error"
    assert event.error.startswith("the MCP server needs authorization: re-authorize with")
    assert time.monotonic() - started < 3.0


def test_an_expired_token_without_a_usable_refresh_asks_to_re_authorize(
    host: Any, add_instance: Any, oauth_server: OAuthServer
) -> None:
    record = add_instance(oauth_server.url, auth="oauth")
    _login(host, record.id, "ann")
    oauth_server.revoke(_stored(host, record.id, "ann", "token")["access_token"])
    _expire_locally(host, record.id, "ann")
    started = time.monotonic()
    event = host.call(record.id, "whoami", {}, user_id="ann")
    assert event.status == "error"
    assert event.error.startswith("the MCP server needs authorization: re-authorize with")
    assert time.monotonic() - started < 3.0
    # Logging in again makes the calls work again.
    _login(host, record.id, "ann")
    assert _client(host.call(record.id, "whoami", {}, user_id="ann"))


def test_a_denied_login_names_the_error(
    host: Any, add_instance: Any, oauth_server: OAuthServer
) -> None:
    record = add_instance(oauth_server.url, auth="oauth")
    with pytest.raises(click.ClickException, match="access_denied"):
        _login(host, record.id, "ann", browser=Browser("deny"))
    assert host.instances.tokens(record.id).get("ann", "token") is None


def test_a_login_without_a_callback_times_out(
    host: Any, add_instance: Any, oauth_server: OAuthServer
) -> None:
    record = add_instance(oauth_server.url, auth="oauth")
    browser = Browser("ignore")
    started = time.monotonic()
    with pytest.raises(click.ClickException, match=r"no callback within 1 s"):
        _login(host, record.id, "ann", browser=browser, timeout=1.0)
    assert time.monotonic() - started < 10
    assert any(line.startswith("http://127.0.0.1") for line in browser.lines)


def test_the_person_may_take_longer_than_the_instance_timeout(
    host: Any, add_instance: Any, oauth_server: OAuthServer
) -> None:
    record = add_instance(oauth_server.url, auth="oauth", timeout=1.0)
    _login(host, record.id, "ann", browser=Browser(delay=2.0))
    assert _client(host.call(record.id, "whoami", {}, user_id="ann"))


def test_a_pre_registered_client_logs_in_on_a_fixed_port(
    host: Any, add_instance: Any, oauth_server: OAuthServer
) -> None:
    from mcp.shared.auth import OAuthClientInformationFull
    from servers import free_port

    port = free_port()
    oauth_server.provider.clients["expediter-app"] = OAuthClientInformationFull(
        client_id="expediter-app",
        client_secret="app-secret",
        redirect_uris=[f"http://127.0.0.1:{port}/callback"],
        grant_types=["authorization_code", "refresh_token"],
        token_endpoint_auth_method="client_secret_post",
    )
    record = add_instance(
        oauth_server.url, auth="oauth", client_id="expediter-app", client_secret="app-secret"
    )
    browser = Browser()
    login(host, record.id, "ann", timeout=20.0, port=port, show=browser.show)
    assert _client(host.call(record.id, "whoami", {}, user_id="ann")) == "expediter-app"
    _expire_locally(host, record.id, "ann")
    assert _client(host.call(record.id, "whoami", {}, user_id="ann")) == "expediter-app"


def test_a_client_credentials_instance_has_no_login(host: Any, add_instance: Any) -> None:
    record = add_instance(
        "http://127.0.0.1:9/mcp", auth="oauth", oauth_grant="client_credentials", client_id="m"
    )
    with pytest.raises(click.ClickException, match="client_credentials fetches its own tokens"):
        _login(host, record.id, None)


# -- machine access ------------------------------------------------------------------------


def test_an_expired_client_credentials_token_is_replaced(host: Any, add_instance: Any) -> None:
    server = CredentialsServer({"machine": "s3cret"}, expires_in=1)
    try:
        record = add_instance(
            server.url,
            auth="oauth",
            oauth_grant="client_credentials",
            client_id="machine",
            client_secret="s3cret",
        )
        assert _client(host.call(record.id, "whoami", {})) == "machine"
        first = host.instances.tokens(record.id).get(None, "token")["value"]["access_token"]
        time.sleep(1.5)
        assert _client(host.call(record.id, "whoami", {})) == "machine"
        second = host.instances.tokens(record.id).get(None, "token")["value"]["access_token"]
        assert len(server.requests) == 2
        assert first != second
    finally:
        server.close()


def test_client_credentials_fetch_and_keep_a_token(host: Any, add_instance: Any) -> None:
    server = CredentialsServer({"machine": "s3cret"})
    try:
        record = add_instance(
            server.url,
            auth="oauth",
            oauth_grant="client_credentials",
            client_id="machine",
            client_secret="s3cret",
        )
        assert _client(host.call(record.id, "whoami", {}, user_id="ann")) == "machine"
        assert _client(host.call(record.id, "whoami", {}, user_id="bob")) == "machine"
        assert [form["grant_type"] for form in server.requests] == ["client_credentials"]
        stored = host.instances.tokens(record.id).get(None, "token")
        assert stored is not None
        assert stored["value"]["access_token"] in server.issued
        # A new session (another tool object, unpooled) uses the stored token.
        tool, context = _tool_and_context(host, record.id, "ann")
        assert "whoami" in tool.list_now(context).names
        assert len(server.requests) == 1
    finally:
        server.close()


def test_client_credentials_need_the_client_id_and_secret(host: Any, add_instance: Any) -> None:
    server = CredentialsServer({"machine": "s3cret"})
    try:
        no_id = add_instance(server.url, name="a", auth="oauth", oauth_grant="client_credentials")
        event = host.call(no_id.id, "whoami", {})
        assert event.status == "error"
        assert "client_id" in event.error
        no_secret = add_instance(
            server.url,
            name="b",
            auth="oauth",
            oauth_grant="client_credentials",
            client_id="machine",
        )
        event = host.call(no_secret.id, "whoami", {})
        assert event.status == "error"
        assert "client_secret" in event.error
        assert server.requests == []
    finally:
        server.close()


def test_the_token_request_goes_through_the_egress_guard(host: Any, add_instance: Any) -> None:
    server = CredentialsServer({"machine": "s3cret"}, token_endpoint="http://10.9.8.7/token")
    try:
        record = add_instance(
            server.url,
            auth="oauth",
            oauth_grant="client_credentials",
            client_id="machine",
            client_secret="s3cret",
            allow_networks=["127.0.0.1/32"],
        )
        event = host.call(record.id, "whoami", {})
        assert event.status == "error"
        assert event.error_type == "EgressBlocked"
    finally:
        server.close()


def test_an_unstored_instance_keeps_client_credentials_tokens_in_memory() -> None:
    server = CredentialsServer({"machine": "s3cret"})
    config = {
        "url": server.url,
        "auth": "oauth",
        "oauth_grant": "client_credentials",
        "client_id": "machine",
        "client_secret": "s3cret",
        "allow_networks": ["127.0.0.0/8"],
    }
    try:
        tool = McpTool(config)
        context = expediter.CallContext(
            instance_id="unstored", tool="mcp", secrets={"client_secret": "s3cret"}
        )
        assert "whoami" in tool.list_now(context).names
        assert "whoami" in McpTool(config).list_now(context).names
        assert len(server.requests) == 1
    finally:
        server.close()


def test_an_unstored_instance_cannot_keep_authorization_code_tokens() -> None:
    tool = McpTool({"url": "http://127.0.0.1:9/mcp", "auth": "oauth"})
    context = expediter.CallContext(instance_id="unstored", tool="mcp")
    with pytest.raises(ReauthorizeNeeded, match="stored instance"):
        oauth_for(tool.settings, {}, context, ("unstored",))


def _tool_and_context(host: Any, instance_id: str, user_id: str) -> tuple[Any, Any]:
    from expediter_mcp.operate import context_for, tool_for

    record, tool = tool_for(host, instance_id)
    return tool, context_for(host, record, user_id)


# -- the token store -----------------------------------------------------------------------


def test_fastmcp_collections_map_to_slot_names() -> None:
    assert slot_name("mcp-oauth-token") == "token"
    assert slot_name("mcp-oauth-client-info") == "client_info"
    assert slot_name("mcp-oauth-token-expiry") == "token_expiry"
    assert slot_name("9 Lives!") == "c_9_lives"
    assert len(slot_name("x" * 200)) == 64


def test_the_store_keeps_urls_apart_and_honours_ttls() -> None:
    async def run() -> None:
        store = TokenStore(MemorySlots(), "ann")
        await store.put("https://a.example/mcp/tokens", {"v": 1}, collection="mcp-oauth-token")
        assert await store.get("https://a.example/mcp/tokens", collection="mcp-oauth-token") == {
            "v": 1
        }
        assert await store.get("https://b.example/mcp/tokens", collection="mcp-oauth-token") is None
        assert await store.get("https://a.example/mcp/tokens", collection="other") is None
        assert not await store.delete("https://b.example/mcp/tokens", collection="mcp-oauth-token")
        await store.put("k", {"v": 2}, collection="c", ttl=60)
        value, left = await store.ttl("k", collection="c")
        assert value == {"v": 2}
        assert left is not None
        assert 50 < left <= 60
        await store.put("k", {"v": 3}, collection="c", ttl=-1)
        assert await store.get("k", collection="c") is None
        assert await store.delete("https://a.example/mcp/tokens", collection="mcp-oauth-token")
        assert await store.get("https://a.example/mcp/tokens", collection="mcp-oauth-token") is None

    asyncio.run(run())
