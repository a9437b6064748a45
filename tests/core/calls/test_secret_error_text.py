"""Secrets never appear in error text: a call's known secrets (its instance's secret fields, its
secret-named and ``Secret``-annotated arguments) are hidden from ``toolset.errors``, the event,
the text the model gets, every ledger field and every log record, the formatted traceback
included, in the forms an error shows them (escaped, percent-encoded, inside base64). Real
tools, stored instances sealed with a real key, and the ledger on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import logging
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote, quote_plus

import pytest
from support.hosts import ledger_host
from support.responses import openai_response

import expediter
from expediter.core.host import Host
from expediter.core.instances.keys import generate_key
from expediter.core.records import redaction
from expediter.core.records.calls import CallEvent
from expediter.core.records.redaction import MASK, hide_values, log_hidden

#: Distinctive values, new for each run.
KEY = f"vault-key-{uuid.uuid4().hex}"
PASSWORD = f"pw-{uuid.uuid4().hex}"
PHRASE = f"phrase-{uuid.uuid4().hex}"
#: Next to each secret in the same message: it must still be shown (the message is not
#: blanked out, and the search would find a leak).
VISIBLE = f"VISIBLE-{uuid.uuid4().hex}"
#: A secret holding what every escape changes: quotes, a backslash, a non-ASCII letter, and
#: what percent-encoding changes.
ODD = f"k'e\"y\\é /+?&={uuid.uuid4().hex[:12]}"


class Vault(expediter.Toolbox):
    """A tool whose errors quote its configuration and its arguments."""

    name = "vault"
    config_fields = (
        # Declared secret under a name that does not look secret.
        expediter.ConfigField("key", secret=True),
        expediter.ConfigField("region"),
        expediter.ConfigField("user"),
    )

    def __init__(self, config: Any = None) -> None:
        super().__init__(config)
        if config and config.get("region") == "nowhere":
            raise ValueError(f"cannot connect to {VISIBLE} with {dict(config)!r}")
        if config and config.get("region") == "exit":
            raise SystemExit(f"cannot start with {dict(config)!r}")

    @expediter.action
    def fetch(self, item: str) -> str:
        """Fetch an item.

        Args:
            item: The item.
        """
        raise RuntimeError(f"upstream refused key {self.config['key']} for {item}")

    @expediter.action
    def login(self, site: str, password: str, phrase: Annotated[str, expediter.Secret] = "") -> str:
        """Log in.

        Args:
            site: The site.
            password: The password.
            phrase: The passphrase.
        """
        raise PermissionError(f"{site} refused password {password!r} and phrase {phrase}")

    @expediter.action
    def request(self, token: str = "") -> str:
        """Send a request signed with the instance's key, or with a token.

        Args:
            token: A token to use instead.
        """
        secret = token or self.config["key"]
        user = self.config.get("user", "anyone")
        raise ConnectionError(_quoting(secret, user))


class Gate(expediter.Toolbox):
    """A tool whose own decision fails, quoting the call's password."""

    name = "gate"

    def preview_decision(
        self, action: str, arguments: dict[str, Any], context: expediter.CallContext
    ) -> None:
        raise LookupError(f"no rule for {arguments['door']} with password {arguments['password']}")

    @expediter.action
    def open(self, door: str, password: str) -> str:
        """Open a door.

        Args:
            door: The door.
            password: Its password.
        """
        return f"{door} open"


def _quoting(secret: str, user: str) -> str:
    """A message quoting a secret as HTTP client errors do: in a dict's repr, as JSON, in a
    URL, as a basic credential and as a bearer token."""
    basic = base64.b64encode(f"{user}:{secret}".encode()).decode()
    alone = base64.urlsafe_b64encode(secret.encode()).decode()
    headers = {"Authorization": f"Bearer {secret}", "X-Other": VISIBLE}
    return (
        f"request to {VISIBLE} failed: headers={headers!r} body={json.dumps(headers)} "
        f"url=https://api.example/v1?key={quote(secret, safe='')}&q={quote_plus(secret)} "
        f"retry=Basic {basic} token={alone}"
    )


def _forms(secret: str, user: str) -> list[str]:
    """What must not appear anywhere: the secret, and each form ``_quoting`` gives it."""
    return [
        secret,
        repr(secret)[1:-1],
        json.dumps(secret)[1:-1],
        quote(secret, safe=""),
        quote_plus(secret),
        base64.b64encode(f"{user}:{secret}".encode()).decode(),
        base64.urlsafe_b64encode(secret.encode()).decode().rstrip("="),
    ]


@pytest.fixture
def host(shared_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Host]:
    monkeypatch.setenv("EXPEDITER_SECRET_KEYS", generate_key())
    made = ledger_host(shared_url, tmp_path / "home", Vault, call_timeout=10)
    yield made
    made.close()


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG)
    return caplog


def _log_texts(caplog: pytest.LogCaptureFixture) -> list[str]:
    """Every record as a handler formatting tracebacks prints it, and all it carries."""
    formatter = logging.Formatter("%(levelname)s %(name)s %(message)s")
    return [f"{formatter.format(record)}\n{record.__dict__!r}" for record in caplog.records]


def _row_text(host: Host, key: str) -> str:
    row = host.ledger.get(key)
    assert row is not None, key
    return json.dumps([row.to_dict(), row.request], default=repr, ensure_ascii=False)


def _event_text(event: CallEvent) -> str:
    return json.dumps(event.to_dict(), default=repr, ensure_ascii=False) + repr(event)


def _database_text(url: str, home: Path) -> str:
    """The SQLite database file and its journal, as text (empty for PostgreSQL)."""
    if not url.startswith("sqlite"):
        return ""
    path = Path(url.removeprefix("sqlite:///"))
    return "".join(
        candidate.read_bytes().decode("latin-1")
        for candidate in (path, Path(f"{path}-wal"))
        if candidate.exists()
    )


def _assert_hidden(needles: list[str], places: dict[str, str]) -> None:
    leaks = [
        (needle, where) for needle in needles for where, text in places.items() if needle in text
    ]
    assert not leaks, f"secrets found: {leaks}"


def _run_turn(
    host: Host, mode: str, instance: str, name: str, arguments: dict[str, Any]
) -> tuple[CallEvent, str]:
    """One call of a model's turn for ann to ``name`` of ``instance`` (an instance id or the
    installed tool's name): its event and the messages the model gets."""
    toolset = host.toolset(user_id="ann")
    offered = toolset.name_map.name_for(instance, name)
    assert offered is not None, toolset.name_map.names
    calls = toolset.parse_calls("openai", openai_response(("c1", offered, arguments)))
    if mode == "run":
        events = list(toolset.run(calls, message_id=f"m-{mode}"))
    else:

        async def collect() -> list[CallEvent]:
            return [event async for event in toolset.arun(calls, message_id=f"m-{mode}")]

        events = asyncio.run(collect())
    [event] = events
    model = json.dumps(toolset.result_messages("openai", calls, events), ensure_ascii=False)
    return event, model


def _tracebacks(texts: list[str], exception: str) -> list[str]:
    """The log texts that hold a formatted traceback ending in ``exception``."""
    return [
        text for text in texts if "Traceback (most recent call last)" in text and exception in text
    ]


# -- (a) a tool that cannot be made from its configuration -------------------------------------


def test_a_constructor_quoting_its_configuration_shows_no_secret(
    host: Host, shared_url: str, tmp_path: Path, logs: pytest.LogCaptureFixture
) -> None:
    stored = host.instances.add("vault", "broken", {"key": KEY, "region": "nowhere"}, user_id="ann")
    explicit = {
        "tool": "vault",
        "instance_id": "given",
        "config": {"key": KEY, "region": "nowhere"},
    }

    toolset = host.toolset(user_id="ann", instances=[explicit])
    assert len(toolset.errors) == 2, toolset.errors
    assert all(VISIBLE in error and MASK in error for error in toolset.errors), toolset.errors
    # Called directly by its id: the tool cannot be made, and the call says why.
    event = host.call(stored.id, "fetch", {"item": "a"}, user_id="ann")
    assert event.status == "error"
    assert VISIBLE in (event.error or "")
    assert MASK in (event.error or "")
    row_text = _row_text(host, event.key)
    assert VISIBLE in row_text

    texts = _log_texts(logs)
    assert len(_tracebacks(texts, "ValueError: cannot connect")) >= 2  # both instances
    _assert_hidden(
        [KEY],
        {
            "toolset.errors": "\n".join(toolset.errors),
            "event": _event_text(event),
            "ledger row": row_text,
            "database": _database_text(shared_url, tmp_path),
            **{f"log record {i}": text for i, text in enumerate(texts)},
        },
    )


def test_a_constructor_calling_sys_exit_with_its_secret_is_that_instances_error(
    host: Host, shared_url: str, tmp_path: Path, logs: pytest.LogCaptureFixture
) -> None:
    # A shared instance: had SystemExit left toolset(), every user's turn would stop (and print
    # the secret, were nothing to catch it).
    stored = host.instances.add("vault", "exits", {"key": KEY, "region": "exit"})
    host.instances.add("vault", "fine", {"key": KEY, "region": "eu"})
    toolset = host.toolset(user_id="bob")
    (error,) = toolset.errors
    assert "tried to exit the program" in error
    assert any(o.action.name == "fetch" for o in toolset.actions)  # the other instance stays
    event = host.call(stored.id, "fetch", {"item": "a"}, user_id="bob")
    assert event.status == "error"
    assert "tried to exit the program" in (event.error or "")
    _assert_hidden(
        [KEY],
        {
            "toolset.errors": "\n".join(toolset.errors),
            "event": _event_text(event),
            "ledger row": _row_text(host, event.key),
            "database": _database_text(shared_url, tmp_path),
            **{f"log record {i}": text for i, text in enumerate(_log_texts(logs))},
        },
    )


# -- (b) a tool raising with its configuration's secret -----------------------------------------


@pytest.mark.parametrize("mode", ["run", "arun"])
def test_a_tool_quoting_its_secret_has_it_hidden_in_the_logged_traceback(
    host: Host, shared_url: str, tmp_path: Path, logs: pytest.LogCaptureFixture, mode: str
) -> None:
    mine = host.instances.add("vault", "mine", {"key": KEY, "region": "eu"}, user_id="ann")
    # The application's own logging (``logging.basicConfig``): a handler on the root logger.
    printed = io.StringIO()
    handler = logging.StreamHandler(printed)
    handler.setFormatter(logging.Formatter(logging.BASIC_FORMAT))
    logging.getLogger().addHandler(handler)
    try:
        event, model = _run_turn(host, mode, mine.id, "fetch", {"item": VISIBLE})
    finally:
        logging.getLogger().removeHandler(handler)
    assert "Traceback (most recent call last)" in printed.getvalue()
    assert (event.status, event.error_type) == ("error", "RuntimeError")
    assert event.error == f"RuntimeError: upstream refused key {MASK} for {VISIBLE}"
    texts = _log_texts(logs)
    [crash] = _tracebacks(texts, "RuntimeError: upstream refused key")
    # The traceback is still useful: where it was raised, and the message, hidden.
    assert "in fetch" in crash
    assert f"RuntimeError: upstream refused key {MASK} for {VISIBLE}" in crash
    _assert_hidden(
        [KEY],
        {
            "event": _event_text(event),
            "model": model,
            "ledger row": _row_text(host, event.key),
            "database": _database_text(shared_url, tmp_path),
            "the application's log": printed.getvalue(),
            **{f"log record {i}": text for i, text in enumerate(texts)},
        },
    )


# -- (c) secret arguments quoted in an exception -------------------------------------------------


@pytest.mark.parametrize("mode", ["run", "arun"])
def test_secret_arguments_quoted_in_an_exception_are_hidden_everywhere(
    host: Host, shared_url: str, tmp_path: Path, logs: pytest.LogCaptureFixture, mode: str
) -> None:
    arguments = {"site": VISIBLE, "password": PASSWORD, "phrase": PHRASE}
    event, model = _run_turn(host, mode, "vault", "login", arguments)
    assert (event.status, event.error_type) == ("error", "PermissionError")
    assert event.error == f"PermissionError: {VISIBLE} refused password '{MASK}' and phrase {MASK}"
    assert event.arguments == {"site": VISIBLE, "password": MASK, "phrase": MASK}
    texts = _log_texts(logs)
    assert _tracebacks(texts, "PermissionError:")
    _assert_hidden(
        [PASSWORD, PHRASE],
        {
            "event": _event_text(event),
            "model": model,
            "ledger row": _row_text(host, event.key),
            "database": _database_text(shared_url, tmp_path),
            **{f"log record {i}": text for i, text in enumerate(texts)},
        },
    )
    # Called directly (the operator's path), the same.
    direct = host.call("vault", "login", arguments, user_id="ann")
    _assert_hidden(
        [PASSWORD, PHRASE],
        {
            "event": _event_text(direct),
            "ledger row": _row_text(host, direct.key),
            **{f"log record {i}": text for i, text in enumerate(_log_texts(logs))},
        },
    )


# -- a decision that fails quoting a secret argument ----------------------------------------------


def test_a_failed_decision_quoting_a_secret_argument_shows_no_secret(
    shared_url: str, tmp_path: Path, logs: pytest.LogCaptureFixture
) -> None:
    gate = ledger_host(shared_url, tmp_path / "gate", Gate)
    try:
        arguments = {"door": VISIBLE, "password": PASSWORD}
        toolset = gate.toolset(user_id="ann")
        name = toolset.name_map.name_for("gate", "open")
        assert name is not None
        calls = toolset.parse_calls("openai", openai_response(("c1", name, arguments)))
        [paused] = toolset.run(calls, message_id="m1")  # a forced prompt: it waits
        assert paused.status == "awaiting_approval"
        assert f"no rule for {VISIBLE} with password {MASK}" in (paused.reason or "")
        denied = gate.call("gate", "open", arguments, user_id="ann")  # forced: refused
        assert denied.status == "denied"
        assert f"no rule for {VISIBLE} with password {MASK}" in (denied.error or "")
        texts = _log_texts(logs)
        assert len(_tracebacks(texts, "LookupError: no rule for")) == 2
        _assert_hidden(
            [PASSWORD],
            {
                "paused event": _event_text(paused),
                "denied event": _event_text(denied),
                "model": json.dumps(toolset.result_messages("openai", calls, [paused])),
                "paused row": _row_text(gate, paused.key),
                "denied row": _row_text(gate, denied.key),
                "database": _database_text(shared_url, tmp_path),
                **{f"log record {i}": text for i, text in enumerate(texts)},
            },
        )
    finally:
        gate.close()


# -- derived forms -------------------------------------------------------------------------------


@pytest.mark.parametrize("source", ["configuration", "argument"])
def test_a_secret_is_hidden_in_the_forms_an_error_quotes_it_in(
    host: Host, shared_url: str, tmp_path: Path, logs: pytest.LogCaptureFixture, source: str
) -> None:
    user = "alice-at-example"
    key, arguments = (ODD, {}) if source == "configuration" else (KEY, {"token": ODD})
    odd = host.instances.add(
        "vault", "odd", {"key": key, "region": "eu", "user": user}, user_id="ann"
    )
    event, model = _run_turn(host, "run", odd.id, "request", arguments)
    assert (event.status, event.error_type) == ("error", "ConnectionError")
    error = event.error or ""
    assert f"request to {VISIBLE} failed" in error
    assert f"'X-Other': '{VISIBLE}'" in error  # the rest of the message is kept
    assert f"Basic {MASK}" in error
    assert f"'Authorization': 'Bearer {MASK}'" in error
    texts = _log_texts(logs)
    assert _tracebacks(texts, "ConnectionError: request to")
    _assert_hidden(
        _forms(ODD, user),
        {
            "event": _event_text(event),
            "model": model,
            "ledger row": _row_text(host, event.key),
            "database": _database_text(shared_url, tmp_path),
            **{f"log record {i}": text for i, text in enumerate(texts)},
        },
    )


def test_a_basic_credential_is_hidden_whoever_the_user_and_wherever_it_starts() -> None:
    secret = "correct-horse-battery"
    for user in ("", "a", "ab", "abc", "someone@example.org"):
        token = base64.b64encode(f"{user}:{secret}".encode()).decode()
        shown = hide_values(f"Authorization: Basic {token}, then {VISIBLE}", frozenset({secret}))
        assert shown == f"Authorization: Basic {MASK}, then {VISIBLE}", user
    # Other base64 text is left alone.
    other = base64.b64encode(b"nothing to see here at all").decode()
    assert hide_values(f"data {other}", frozenset({secret})) == f"data {other}"


# -- very short secrets --------------------------------------------------------------------------


def test_very_short_secrets_do_not_turn_errors_into_asterisks(
    host: Host, logs: pytest.LogCaptureFixture
) -> None:
    short = host.instances.add("vault", "short", {"key": "ab", "region": "eu"}, user_id="ann")
    event, _ = _run_turn(host, "run", short.id, "fetch", {"item": "table ab, row 7"})
    # A two-character key is not searched for in text: the message stays readable.
    assert event.error == "RuntimeError: upstream refused key ab for table ab, row 7"
    login = host.call("vault", "login", {"site": "step 7 of 77", "password": "7"}, user_id="ann")
    assert login.error == "PermissionError: step 7 of 77 refused password '7' and phrase "
    assert login.arguments == {"site": "step 7 of 77", "password": MASK}  # hidden by its name
    # From four characters, a secret is hidden.
    login = host.call("vault", "login", {"site": "a 7a7a", "password": "7a7a"}, user_id="ann")
    assert login.error == f"PermissionError: a {MASK} refused password '{MASK}' and phrase "
    # Numbers from six characters (shorter ones are line numbers, ports, counts, years).
    assert redaction.secret_texts([12345, 123456, "abc", "abcd", True, {"n": ["wxyz"]}]) == {
        "123456",
        "abcd",
        "wxyz",
    }


@pytest.mark.parametrize("secret", ["pässwörd-0123", "plain-ascii-secret"])
def test_a_secret_is_hidden_as_its_bytes_and_in_hexadecimal(secret: str) -> None:
    data = secret.encode()
    for shown in (repr(data), data.hex(), data.hex().upper(), f"sent {data!r} to {VISIBLE}"):
        hidden = hide_values(shown, frozenset({secret}))
        assert secret not in hidden
        assert repr(data)[2:-1] not in hidden
        assert data.hex() not in hidden.lower()
    assert hide_values(f"sent {data!r} to {VISIBLE}", frozenset({secret})) == (
        f"sent b'{MASK}' to {VISIBLE}"
    )


def test_a_log_argument_whose_str_raises_is_logged_without_raising(
    logs: pytest.LogCaptureFixture,
) -> None:
    class Unprintable:
        def __str__(self) -> str:
            raise RuntimeError("no str")

    logger = logging.getLogger("expediter.test.hidden")
    log_hidden(logger, logging.ERROR, "%d %s", Unprintable(), KEY, secrets=frozenset({KEY}))
    (record,) = [r for r in logs.records if r.name == logger.name]
    assert KEY not in record.getMessage()
    assert "<Unprintable>" in record.getMessage()
