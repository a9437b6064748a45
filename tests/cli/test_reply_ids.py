"""`expediter run` keys a reply's calls by the reply's own id: running one saved reply twice
runs none of its calls twice (``--message-id`` still names the message when given)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from support.responses import RESPONSES, SAVED, load

from expediter.cli import cli
from expediter.core.host import Host
from expediter.core.ledger import Ledger
from expediter.errors import ArgumentError
from expediter.providers import Provider, usable_message_id

#: The id each saved reply carries (ollama's replies have none).
REPLY_IDS = {
    "openai": "chatcmpl-BZ3kq8XfJ2mNwY7vR1tLpQ9sDc4Ae",
    "openai-responses": "resp_68a1f0c2e4b88190a6d1c3b5f7e9a2d40c6e8b1a3f5d7c9e",
    "anthropic": "msg_01XFDUDYJgAACzvnptvVoYEL",
    "gemini": "Kx8xaPbRJ4WXz7IP6dKs4Ag",
    "mistral": "cf79f7daaee244b1a0ae5c7b1444d25b",
    "ollama": None,
}


def invoke(*args: str) -> tuple[int, list[dict[str, Any]], str]:
    env = {"EXPEDITER_DISABLE_PLUGIN_AUTOLOAD": "1"}
    result = CliRunner().invoke(cli, list(args), prog_name="expediter", env=env)
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    lines = result.stdout.splitlines() if "--json" in args else []
    return result.exit_code, [json.loads(line) for line in lines], result.stderr


@pytest.fixture
def ledger(expediter_home: Path) -> Iterator[Ledger]:
    opened = Ledger(None, home=expediter_home)
    yield opened
    opened.close()


@pytest.mark.parametrize("provider", [p for p, reply_id in REPLY_IDS.items() if reply_id])
def test_a_saved_reply_run_twice_runs_each_call_once(
    provider: str, ledger: Ledger, expediter_home: Path
) -> None:
    path = RESPONSES / SAVED[provider]
    code, first, err = invoke("run", "--provider", provider, "--response", str(path), "--json")
    assert code == 0, err
    assert "warning" not in err
    assert {event["status"] for event in first} == {"completed"}
    assert [event["key"] for event in first] == [
        f"{REPLY_IDS[provider]}:{event['call_id']}" for event in first
    ]
    code, second, _ = invoke("run", "--provider", provider, "--response", str(path), "--json")
    assert code == 1
    assert [event["key"] for event in second] == [event["key"] for event in first]
    for event in second:
        assert (event["status"], event["error_type"]) == ("error", "LedgerError")
        assert "it was not run again" in event["error"]
    rows = ledger.rows(limit=0)
    assert sorted(row.key for row in rows) == sorted(event["key"] for event in first)
    assert {row.status for row in rows} == {"executed"}


def test_the_message_id_option_still_names_the_message(ledger: Ledger) -> None:
    path = RESPONSES / SAVED["openai"]
    for message in ("m1", "m2"):
        code, events, _ = invoke("run", "--response", str(path), "--message-id", message, "--json")
        assert code == 0
        assert {event["key"].partition(":")[0] for event in events} == {message}
    assert len(ledger.rows(limit=0)) == 2 * len(events)


def test_a_reply_without_an_id_runs_with_a_warning_saying_so(ledger: Ledger) -> None:
    path = RESPONSES / SAVED["ollama"]
    for _ in range(2):
        code, _, err = invoke("run", "--provider", "ollama", "--response", str(path))
        assert code == 0
        assert err.strip() == (
            "warning: the reply has no id to key its calls in the ledger: running it again "
            "runs its calls again (give --message-id to name the model's message)"
        )


@pytest.mark.parametrize(
    ("reply_id", "usable"),
    [
        ("chatcmpl-abc", True),
        ("Kx8xaPbRJ4WXz7IP6dKs4Ag==", True),
        ("a:b", False),  # the ledger key's own separator
        ("a b", False),
        ("a\x00", False),
        ("", False),
        ("x" * 201, False),
        (7, False),
        (None, False),
        (["id"], False),
        ("-leading", False),
    ],
)
def test_a_reply_id_that_cannot_key_the_ledger_is_not_used(
    make_host: Callable[..., Host], reply_id: Any, usable: bool
) -> None:
    assert (usable_message_id(reply_id) is not None) is usable
    response = {**load(SAVED["openai"]), "id": reply_id}
    found = make_host().toolset().message_id("openai", response)
    assert found == (reply_id if usable else None)


def test_each_provider_reads_its_replys_id(make_host: Callable[..., Host]) -> None:
    toolset = make_host().toolset()
    for provider, reply_id in REPLY_IDS.items():
        assert toolset.message_id(provider, load(SAVED[provider])) == reply_id, provider


class Raising(Provider):
    name = "raising"

    def message_id(self, response: Any) -> str | None:
        raise RuntimeError("boom")


def test_a_pack_adapter_whose_message_id_raises_is_an_argument_error_naming_it(
    make_host: Callable[..., Host],
) -> None:
    class Pack:
        import expediter

        @expediter.hookimpl
        def register_providers(self, register: Callable[[Provider], None]) -> None:
            register(Raising())

    toolset = make_host(Pack()).toolset()
    with pytest.raises(ArgumentError, match="raising"):
        toolset.message_id("raising", {"id": "x"})
