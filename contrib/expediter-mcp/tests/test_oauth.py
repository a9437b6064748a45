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
from expediter_mcp.config import Settings
from expediter_mcp.oauth import ReauthorizeNeeded, TokenStore, oauth_for
from expediter_mcp.oauth.flows import secret_texts, subject_of
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


def test_the_token_rows_say_when_the_access_token_expires(
    host: Any, add_instance: Any, oauth_server: OAuthServer, tmp_path: Path
) -> None:
    def expiries() -> dict[str, float | None]:
        with sqlite3.connect(tmp_path / "ledger.db") as db:
            query = "SELECT name, expires_at FROM oauth_tokens WHERE user_id = 'ann'"
            return dict(db.execute(query).fetchall())

    record = add_instance(oauth_server.url, auth="oauth")
    started = time.time()
    _login(host, record.id, "ann")
    rows = expiries()
    expiry = _stored(host, record.id, "ann", "token_expiry")["expires_at"]
    # The access token's hour (the test server's), not fastmcp's storage TTL of a year.
    token_expires = rows["token"]
    assert token_expires is not None
    assert started + 3600 - 1 <= token_expires <= time.time() + 3600 + 1
    assert token_expires == pytest.approx(expiry, abs=1)
    assert rows["token_expiry"] == expiry
    assert rows["client_info"] is None
    # A refresh moves it to the new token's expiry.
    _expire_locally(host, record.id, "ann")
    refreshed = time.time()
    assert _client(host.call(record.id, "whoami", {}, user_id="ann"))
    rows = expiries()
    assert rows["token"] is not None
    assert rows["token"] >= refreshed + 3600 - 1
    assert rows["token_expiry"] == _stored(host, record.id, "ann", "token_expiry")["expires_at"]


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


def test_secret_texts_are_the_tokens_a_flow_holds(
    host: Any, add_instance: Any, oauth_server: OAuthServer
) -> None:
    record = add_instance(oauth_server.url, auth="oauth")
    _login(host, record.id, "ann")
    tool, context = _tool_and_context(host, record.id, "ann")
    auth = oauth_for(tool.settings, {}, context, ("test",))
    assert secret_texts(auth) == frozenset()  # nothing loaded yet
    tool.list_now(context, auth=auth)
    tokens = _stored(host, record.id, "ann", "token")
    client_secret = _stored(host, record.id, "ann", "client_info").get("client_secret")
    expected = {tokens["access_token"], tokens["refresh_token"]}
    assert secret_texts(auth) == expected | ({client_secret} if client_secret else set())
    # After a refresh it names the new tokens.
    _expire_locally(host, record.id, "ann")
    oauth_server.expire(tokens["access_token"])
    fresh = oauth_for(tool.settings, {}, context, ("test",))
    tool.list_now(context, auth=fresh)
    renewed = _stored(host, record.id, "ann", "token")
    assert renewed["access_token"] != tokens["access_token"]
    assert {renewed["access_token"], renewed["refresh_token"]} <= secret_texts(fresh)
    assert tokens["access_token"] not in secret_texts(fresh)


def test_secret_texts_of_other_auth_objects_are_empty() -> None:
    import httpx2

    for auth in (None, object(), "a-long-enough-text", httpx2.BasicAuth("user", "password1")):
        assert secret_texts(auth) == frozenset()


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


def test_only_a_callback_with_the_logins_state_ends_it(
    host: Any, add_instance: Any, oauth_server: OAuthServer
) -> None:
    # A local page that finds the callback's port cannot end (or cancel) the login.
    stray = [
        lambda state: {"error": "access_denied"},
        lambda state: {"error": "access_denied", "state": "not-" + state},
        lambda state: {"error": "access_denied", "state": ""},
        lambda state: {"code": "forged", "state": "not-" + state},
        lambda state: {"code": "forged"},
        lambda state: {"state": state},  # neither a code nor an error
    ]
    browser = _login(
        host, add_instance(oauth_server.url, auth="oauth").id, "ann", browser=Browser(stray=stray)
    )
    assert [response.status_code for response in browser.stray_responses] == [400] * len(stray)
    assert browser.responses[0].status_code == 200
    assert browser.errors == []


def test_a_denial_with_another_state_does_not_end_the_login(
    host: Any, add_instance: Any, oauth_server: OAuthServer
) -> None:
    record = add_instance(oauth_server.url, auth="oauth")
    stray = [lambda state: {"error": "access_denied"}]
    with pytest.raises(click.ClickException, match=r"no callback within 1 s"):
        _login(host, record.id, "ann", browser=Browser("ignore", stray=stray), timeout=1.0)


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


def test_client_credentials_fetch_and_keep_a_token(
    host: Any, add_instance: Any, tmp_path: Path
) -> None:
    server = CredentialsServer({"machine": "s3cret"})
    try:
        record = add_instance(
            server.url,
            auth="oauth",
            oauth_grant="client_credentials",
            client_id="machine",
            client_secret="s3cret",
        )
        started = time.time()
        assert _client(host.call(record.id, "whoami", {}, user_id="ann")) == "machine"
        assert _client(host.call(record.id, "whoami", {}, user_id="bob")) == "machine"
        assert [form["grant_type"] for form in server.requests] == ["client_credentials"]
        stored = host.instances.tokens(record.id).get(None, "token")
        assert stored is not None
        access_token = stored["value"]["access_token"]
        assert access_token in server.issued
        with sqlite3.connect(tmp_path / "ledger.db") as db:
            (expires_at,) = db.execute(
                "SELECT expires_at FROM oauth_tokens WHERE name = 'token'"
            ).fetchone()
        assert started + 3600 - 1 <= expires_at <= time.time() + 3600 + 1
        # A new session (another tool object, unpooled) uses the stored token.
        tool, context = _tool_and_context(host, record.id, "ann")
        assert "whoami" in tool.list_now(context).names
        assert len(server.requests) == 1
        # The flow holds the token (the client secret is too short to be named).
        auth = oauth_for(tool.settings, {"client_secret": "s3cret"}, context, ("test",))
        assert secret_texts(auth) == frozenset()
        tool.list_now(context, auth=auth)
        assert secret_texts(auth) == {access_token}
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


class _Recording:
    """Token slots that note the plain ``expires_at`` each slot was put with."""

    def __init__(self) -> None:
        self.inner = MemorySlots()
        self.expiries: dict[str, float | None] = {}

    def get(self, user_id: str | None, name: str = "tokens") -> dict[str, Any] | None:
        return self.inner.get(user_id, name)

    def put(
        self,
        user_id: str | None,
        data: Any,
        *,
        name: str = "tokens",
        expires_at: float | None = None,
    ) -> None:
        self.expiries[name] = expires_at
        self.inner.put(user_id, data, name=name, expires_at=expires_at)

    def delete(self, user_id: str | None, name: str | None = None) -> None:
        self.inner.delete(user_id, name)


def test_the_store_marks_slots_with_the_access_tokens_expiry() -> None:
    year = 60 * 60 * 24 * 365

    async def run() -> None:
        slots = _Recording()
        store = TokenStore(slots, "ann")
        token = {"access_token": "a" * 20, "expires_in": 60, "refresh_token": "r" * 20}
        before = time.time()
        await store.put("u/tokens", token, collection="mcp-oauth-token", ttl=year)
        assert before + 60 <= (slots.expiries["token"] or 0) <= time.time() + 60
        assert await store.get("u/tokens", collection="mcp-oauth-token") == token
        await store.put(
            "u/token_expiry", {"expires_at": 1234.5}, collection="mcp-oauth-token-expiry", ttl=year
        )
        assert slots.expiries["token_expiry"] == 1234.5
        # A token without a known expiry, and what is no token, leave it unset.
        await store.put("u/tokens", {"access_token": "a" * 20}, collection="mcp-oauth-token")
        assert slots.expiries["token"] is None
        await store.put(
            "u/client_info", {"client_id": "c"}, collection="mcp-oauth-client-info", ttl=60
        )
        assert slots.expiries["client_info"] is None
        # fastmcp's TTL still decides what reads as missing.
        assert await store.get("u/client_info", collection="mcp-oauth-client-info") is not None
        await store.put("u/tokens", token, collection="mcp-oauth-token", ttl=-1)
        assert slots.expiries["token"] is not None
        assert await store.get("u/tokens", collection="mcp-oauth-token") is None

    asyncio.run(run())


def test_subject_of_is_the_invoker_only_for_their_own_tokens() -> None:
    context = expediter.CallContext(instance_id="i", tool="mcp", user_id="ann", owner_id="olga")

    def subject(**config: Any) -> str | None:
        return subject_of(Settings.read({"url": "http://127.0.0.1:9/mcp", **config}), context)

    assert subject(auth="oauth") == "ann"
    assert subject(auth="oauth", token_scope="invoker") == "ann"
    assert subject(auth="oauth", token_scope="owner") == "olga"
    assert subject(auth="oauth", oauth_grant="client_credentials") == "olga"
    assert subject(auth="oauth", oauth_grant="client_credentials", token_scope="owner") == "olga"
    assert subject(auth="bearer") == "olga"
    assert subject() == "olga"
