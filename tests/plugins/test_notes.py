"""The built-in notes tool, on a real records store (SQLite and PostgreSQL)."""

from __future__ import annotations

from typing import Any

import pytest

import expediter
from expediter.core.records.text import echo
from expediter.hookspecs.tool import CallContext
from expediter.plugins import notes
from expediter.plugins.notes import Notes

from .conftest import RecordingToolContract, Scoped


class TestNotesContract(RecordingToolContract):
    tool = notes
    examples = {
        "add": {"text": "Call the dentist on Monday"},
        "list": {},
        "search": {"query": "dentist"},
    }


def call(context: CallContext, action: str, **arguments: Any) -> Any:
    """Run an action through the tool's hooks, as a host does."""
    return Notes().execute_action(action, arguments, context)


@pytest.fixture
def alice(scoped: Scoped) -> CallContext:
    return scoped("notes")


def test_add_returns_the_note_stripped_with_its_id_and_times(alice: CallContext) -> None:
    note = call(alice, "add", text="  Call the dentist on Monday \n")["note"]
    assert set(note) == {"id", "text", "created_at", "updated_at"}
    assert note["text"] == "Call the dentist on Monday"
    assert note["id"]
    assert note["created_at"] == note["updated_at"]


def test_list_holds_every_note_oldest_first_with_a_count(alice: CallContext) -> None:
    assert call(alice, "list") == {"notes": [], "count": 0}
    first = call(alice, "add", text="first")["note"]
    second = call(alice, "add", text="second")["note"]
    assert call(alice, "list") == {"notes": [first, second], "count": 2}


def test_search_ranks_the_note_matching_more_words_first_and_ignores_case(
    alice: CallContext,
) -> None:
    milk = call(alice, "add", text="Buy MILK")["note"]
    both = call(alice, "add", text="buy milk and Eggs")["note"]
    call(alice, "add", text="walk the dog")
    result = call(alice, "search", query="eggs milk")
    assert result == {"notes": [both, milk], "count": 2}
    assert call(alice, "search", query="MILK")["count"] == 2
    assert call(alice, "search", query="cat") == {"notes": [], "count": 0}


def test_like_wildcards_in_notes_and_queries_match_only_themselves(alice: CallContext) -> None:
    underscore = call(alice, "add", text="rename snake_case names")["note"]
    percent = call(alice, "add", text="battery at 100% now")["note"]
    call(alice, "add", text="rename snakeXcase names, battery at 100 now")
    assert call(alice, "search", query="snake_case")["notes"] == [underscore]
    assert call(alice, "search", query="_")["notes"] == [underscore]
    # A query's words are letters, digits and '_': '%' is no word, and no wildcard either.
    assert call(alice, "search", query="%")["notes"] == []
    assert percent in call(alice, "search", query="100%")["notes"]


def test_delete_removes_the_note_with_the_id_add_returned(alice: CallContext) -> None:
    kept = call(alice, "add", text="keep me")["note"]
    gone = call(alice, "add", text="delete me")["note"]
    assert call(alice, "delete", note_id=gone["id"]) == {"deleted": gone["id"]}
    assert call(alice, "list")["notes"] == [kept]
    with pytest.raises(expediter.ToolError, match="no note with id"):
        call(alice, "delete", note_id=gone["id"])


def test_each_user_sees_and_deletes_only_their_own_notes(scoped: Scoped) -> None:
    alice, bob = scoped("notes", user="alice"), scoped("notes", user="bob")
    hers = call(alice, "add", text="alice's secret plan")["note"]
    his = call(bob, "add", text="bob's secret plan")["note"]
    assert call(alice, "list")["notes"] == [hers]
    assert call(bob, "search", query="secret plan")["notes"] == [his]
    with pytest.raises(expediter.ToolError, match="no note with id"):
        call(bob, "delete", note_id=hers["id"])
    assert call(alice, "list")["notes"] == [hers]


def test_two_instances_of_the_tool_keep_separate_notes(scoped: Scoped) -> None:
    work, home = scoped("notes", instance="notes-work"), scoped("notes", instance="notes-home")
    at_work = call(work, "add", text="send the report")["note"]
    call(home, "add", text="water the plants")
    assert call(work, "list")["notes"] == [at_work]
    assert call(home, "search", query="report")["count"] == 0


@pytest.mark.parametrize(
    "note_id", ["nope", "0" * 12, "x" * 10_000, "a\x00b", "\ud800", "", "  ", "' OR 1=1 --"]
)
def test_an_unknown_id_is_a_tool_error_quoting_it_bounded(alice: CallContext, note_id: str) -> None:
    call(alice, "add", text="a note")
    with pytest.raises(expediter.ToolError) as raised:
        call(alice, "delete", note_id=note_id)
    assert str(raised.value) == (
        f"no note with id {echo(note_id, 64)}; list the notes to see their ids"
    )
    assert len(str(raised.value)) < 200
    assert call(alice, "list")["count"] == 1


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "'text' is empty"),
        (" \n\t ", "'text' is empty"),
        ("\x00\x01\x7f", "'text' is empty"),
        ("x" * 4_001, "'text' has 4,001 characters; the limit is 4,000"),
        ("😀" * 10_000, "'text' has 10,000 characters; the limit is 4,000"),
    ],
)
def test_empty_or_too_long_text_is_a_tool_error(
    alice: CallContext, text: str, fragment: str
) -> None:
    with pytest.raises(expediter.ToolError, match=fragment):
        call(alice, "add", text=text)
    assert call(alice, "list")["count"] == 0


def test_an_empty_query_is_a_tool_error(alice: CallContext) -> None:
    with pytest.raises(expediter.ToolError, match="'query' is empty"):
        call(alice, "search", query="  ")


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("before\x00after", "beforeafter"),
        ("half \ud800 a pair", "half \ufffd a pair"),
        ("bell\x07 tab\t line\nend", "bell tab\t line\nend"),
        ("😀" * 4_000, "😀" * 4_000),
        ("'; DROP TABLE tool_records; --", "'; DROP TABLE tool_records; --"),
    ],
)
def test_hostile_text_is_kept_clean_and_read_back(alice: CallContext, text: str, kept: str) -> None:
    note = call(alice, "add", text=text)["note"]
    assert note["text"] == kept
    assert call(alice, "list")["notes"] == [note]


def test_hostile_queries_find_nothing_or_are_refused_without_failing(alice: CallContext) -> None:
    call(alice, "add", text="an ordinary note")
    for query in ("\ud800", "😀" * 4_000, "%_%", "'\"\\;--", "note\x00s"):
        assert call(alice, "search", query=query)["notes"] == [], query
    for query in ("\x00", "😀" * 4_001):
        with pytest.raises(expediter.ToolError, match="'query'"):
            call(alice, "search", query=query)


@pytest.mark.parametrize(
    ("action", "arguments"),
    [
        ("add", {"text": "x"}),
        ("list", {}),
        ("search", {"query": "x"}),
        ("delete", {"note_id": "x"}),
    ],
)
def test_without_the_hosts_database_every_action_is_a_tool_error(
    action: str, arguments: dict[str, Any]
) -> None:
    with pytest.raises(expediter.ToolError, match="needs the host's database") as raised:
        call(CallContext(user_id="alice"), action, **arguments)
    assert "record_calls=False" in str(raised.value)


def test_a_host_without_a_database_reports_a_tool_error_and_asks_no_approval(call_tool) -> None:
    event = call_tool(notes, "delete", {"note_id": "abc"}, user_id="alice")
    assert (event.status, event.error_type) == ("error", "ToolError")
    assert "needs the host's database" in (event.error or "")


def test_a_recording_host_keeps_each_users_notes(make_host) -> None:
    host = make_host(notes, record_calls=True)
    added = host.call("notes", "add", {"text": "alice's note"}, user_id="alice").result["note"]
    host.call("notes", "add", {"text": "bob's note"}, user_id="bob")
    listed = host.call("notes", "list", {}, user_id="alice")
    assert (listed.status, listed.result) == ("completed", {"notes": [added], "count": 1})
    deleted = host.call("notes", "delete", {"note_id": added["id"]}, user_id="alice")
    assert (deleted.status, deleted.result) == ("completed", {"deleted": added["id"]})
