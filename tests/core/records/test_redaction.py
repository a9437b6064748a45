"""Redaction: which argument names are secret (whole tokens, a decision table), hiding their
values and the names an action marks ``writeOnly``, the fast path, and database URLs shown
without their passwords."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from expediter.core.records.redaction import (
    MASK,
    is_secret_name,
    mask_url,
    mask_url_in,
    redact,
    write_only_names,
)

# -- which names are secret: the decision table ----------------------------------------------

#: ``(name, secret?, why)``: names are split into whole tokens on ``_ - .``, spaces, camelCase
#: and digits, and a token (or an adjacent pair) is compared, never a substring.
NAME_DECISIONS = [
    # the classic words
    ("password", True, "word"),
    ("db_password", True, "token"),
    ("password2", True, "digits split off"),
    ("passwd", True, "word"),
    ("pwd", True, "word"),
    ("passphrase", True, "word"),
    ("client_secret", True, "token"),
    ("access_token", True, "token"),
    ("githubToken", True, "camelCase token"),
    ("Authorization", True, "header"),
    ("authorisation", True, "British spelling"),
    ("cookie", True, "word"),
    ("credentials", True, "word"),
    ("jwt", True, "word"),
    ("bearer", True, "word"),
    # the pairs
    ("api_key", True, "pair"),
    ("X-Api-Key", True, "pair, header form"),
    ("APIKey", True, "acronym then word"),
    ("apikey", True, "compound word"),
    ("private_key", True, "pair"),
    ("aws.access.key", True, "pair, dotted"),
    ("sessionKey", True, "pair"),
    ("signing_key", True, "pair"),
    ("card_number", True, "pair: a card number"),
    ("securityCode", True, "pair: a card's security code"),
    ("verification_code", True, "pair: a one-time code"),
    # new in this release: auth, pin, ssn, passcode, otp, cvv...
    ("auth", True, "word"),
    ("X-Auth-Token", True, "token and word"),
    ("auth_type", True, "token: over-hiding a scheme name is the safe side"),
    ("OAuth", False, "one token naming a scheme (its token fields are caught)"),
    ("pin", True, "word"),
    ("user_pin", True, "token"),
    ("userPin", True, "camelCase token"),
    ("PIN", True, "upper case"),
    ("ssn", True, "word"),
    ("passcode", True, "word"),
    ("otp", True, "word"),
    ("totp_code", True, "token"),
    ("cvv", True, "word"),
    ("cvv2", True, "digits split off"),
    ("cvc", True, "word"),
    ("Authentication", True, "word (a header some APIs use)"),
    ("Ocp-Apim-Subscription-Key", True, "pair"),
    ("subscription_key", True, "pair"),
    ("subscription_id", False, "not a pair"),
    ("pass", True, "whole name only"),
    ("pw", True, "whole name only"),
    # ordinary names that merely contain a secret word, or sit next to one
    ("author", False, "a whole token, not auth"),
    ("authority", False, "a whole token"),
    ("oauth_provider", False, "oauth is not auth"),
    ("OAuthProvider", False, "OAuth read as one token"),
    ("spinner", False, "a whole token, not pin"),
    ("pinned", False, "a whole token"),
    ("pinyin", False, "a whole token"),
    ("max_tokens", False, "tokens (plural) counts text, not a credential"),
    ("passage", False, "substring"),
    ("compass", False, "substring"),
    ("bypass", False, "substring"),
    ("pass_through", False, "pass only as the whole name"),
    ("keyword", False, "key alone is not secret"),
    ("sort_key", False, "key alone is not secret"),
    ("primary_key", False, "not a pair"),
    # session: an identifier far more often than a credential; its credentials are caught
    ("session", False, "decision: names a conversation"),
    ("session_id", False, "decision: names a conversation"),
    ("sessionId", False, "decision: names a conversation"),
    ("session_token", True, "token"),
    ("session_secret", True, "token"),
    ("session_cookie", True, "token"),
]


@pytest.mark.parametrize(
    ("name", "secret"),
    [pytest.param(name, secret, id=f"{name}-{why}") for name, secret, why in NAME_DECISIONS],
)
def test_secret_names_are_matched_by_whole_tokens(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret


@pytest.mark.parametrize(
    "name", ["user_pin", "userPin", "X-Auth-Token", "auth", "ssn", "passcode", "otp"]
)
def test_values_under_the_new_secret_names_are_hidden(name: str) -> None:
    assert redact({name: "1234", "query": "cats"}) == {name: MASK, "query": "cats"}


@pytest.mark.parametrize("name", ["spinner", "author", "pinned", "session_id"])
def test_values_under_look_alike_names_are_kept(name: str) -> None:
    arguments = {name: "kept"}
    assert redact(arguments) is arguments


# -- names an action marks secret -------------------------------------------------------------


def test_extra_secret_names_are_hidden_at_any_depth() -> None:
    arguments = {"note": "s1", "query": "q", "items": [{"note": "s2", "n": 1}]}
    assert redact(arguments, frozenset({"note"})) == {
        "note": MASK,
        "query": "q",
        "items": [{"note": MASK, "n": 1}],
    }
    assert arguments["note"] == "s1"  # the caller's arguments are left alone


def test_the_common_call_is_returned_without_a_copy() -> None:
    arguments = {"query": "cats", "limit": 3}
    assert redact(arguments) is arguments
    assert redact(arguments, frozenset({"note"})) is arguments


def test_a_call_with_an_extra_secret_name_is_copied() -> None:
    arguments = {"note": "s", "limit": 3}
    hidden = redact(arguments, frozenset({"note"}))
    assert hidden is not arguments
    assert hidden == {"note": MASK, "limit": 3}


@given(
    st.dictionaries(st.text(max_size=12), st.one_of(st.none(), st.integers(), st.text(max_size=8))),
    st.frozensets(st.text(max_size=12), max_size=3),
)
def test_redaction_hides_exactly_the_secret_keys(
    arguments: dict[str, object], secret_names: frozenset[str]
) -> None:
    hidden = redact(arguments, secret_names)
    assert set(hidden) == set(arguments)
    for key, value in arguments.items():
        secret = key in secret_names or is_secret_name(key)
        assert hidden[key] == (MASK if secret else value)


def test_write_only_properties_are_the_secret_parameters() -> None:
    schema = {
        "type": "object",
        "properties": {
            "note": {"type": "string", "writeOnly": True},
            "maybe": {"anyOf": [{"type": "string", "writeOnly": True}, {"type": "null"}]},
            "codes": {"type": "array", "items": {"type": "string", "writeOnly": True}},
            "login": {"$ref": "#/$defs/Login"},
            "query": {"type": "string"},
            "off": {"type": "string", "writeOnly": False},
        },
        "$defs": {
            "Login": {
                "type": "object",
                "properties": {"code": {"type": "string", "writeOnly": True}, "user": {}},
            }
        },
    }
    assert write_only_names(schema) == {"note", "maybe", "codes", "code"}
    assert write_only_names({"type": "object"}) == frozenset()
    assert write_only_names({"properties": {"x": "not a schema"}}) == frozenset()


# -- database URLs ---------------------------------------------------------------------------

URL_MASKS = [
    ("postgresql://u:S3CRET@h/db", "postgresql://u:***@h/db"),
    ("postgresql+psycopg://u:S3CRET@h:5432/db", "postgresql+psycopg://u:***@h:5432/db"),
    ("postgresql://u:S3#C?R/ET@h/db", "postgresql://u:***@h/db"),
    ("postgresql://u:S3@CRET@h/db", "postgresql://u:***@h/db"),
    ("postgresql://u:S3CRET@[::1/db", "postgresql://u:***@[::1/db"),
    ("postgresql://u@h/db?password=S3CRET", "postgresql://u@h/db?password=***"),
    (
        "postgresql://h/db?application_name=x&password=S3&CR#ET&sslmode=require",
        "postgresql://h/db?application_name=x&password=***&sslmode=require",
    ),
    (
        "postgresql://h/db?sslpassword=S3CRET&passfile=/p",
        "postgresql://h/db?sslpassword=***&passfile=/p",
    ),
    ("postgresql://u:S3CRET@h/db?x=a@b", "postgresql://u:***@h/db?x=a@b"),
    ("postgresql://h:5432/db?application_name=a@b", "postgresql://h:5432/db?application_name=a@b"),
    ("postgresql://u@h:5432/db", "postgresql://u@h:5432/db"),
    ("host=h password=S3CRET dbname=d", "host=h password=*** dbname=d"),
    ("host=h password='S3 CR\\'ET' dbname=d", "host=h password=*** dbname=d"),
    ("mysql://u:S3CRET@h/db", "mysql://u:***@h/db"),
    ("sqlite:////tmp/a:b@c.db?synchronous=full", "sqlite:////tmp/a:b@c.db?synchronous=full"),
    ("sqlite:///ledger.db", "sqlite:///ledger.db"),
]


@pytest.mark.parametrize(("url", "shown"), URL_MASKS)
def test_database_urls_are_shown_without_their_passwords(url: str, shown: str) -> None:
    assert mask_url(url) == shown
    assert "S3" not in shown


@given(st.text(max_size=40))
def test_masking_never_raises_and_never_shows_a_userinfo_password(password: str) -> None:
    url = f"postgresql://user:{password}@db.example/ledger"
    shown = mask_url(url)
    if password:
        assert shown == "postgresql://user:***@db.example/ledger"


def test_a_drivers_message_is_scrubbed_of_the_password_as_written_and_decoded() -> None:
    url = "postgresql://u:p%40ssw0rd@h/db"
    message = f'invalid percent-encoded token: "p@ssw0rd" in {url}'
    assert mask_url_in(message, url) == (
        'invalid percent-encoded token: "***" in postgresql://u:***@h/db'
    )
