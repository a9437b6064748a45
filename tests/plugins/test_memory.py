"""The built-in memory tool, on a real records store (SQLite and PostgreSQL)."""

from __future__ import annotations

from typing import Any

import pytest

import expediter
from expediter.core.records.text import echo
from expediter.hookspecs.tool import CallContext
from expediter.plugins import memory
from expediter.plugins.memory import Memory

from .conftest import RecordingToolContract, Scoped


class TestMemoryContract(RecordingToolContract):
    tool = memory
    examples = {"remember": {"text": "Prefers metric units"}, "recall": {"query": "units"}}


def call(context: CallContext, action: str, **arguments: Any) -> Any:
    """Run an action through the tool's hooks, as a host does."""
    return Memory().execute_action(action, arguments, context)


@pytest.fixture
def alice(scoped: Scoped) -> CallContext:
    return scoped("memory")


def test_remember_returns_the_memory_with_its_id_and_times(alice: CallContext) -> None:
    fact = call(alice, "remember", text=" Prefers metric units\n")["memory"]
    assert set(fact) == {"id", "text", "created_at", "updated_at"}
    assert fact["text"] == "Prefers metric units"


def test_recall_ranks_the_memory_matching_more_words_first_and_ignores_case(
    alice: CallContext,
) -> None:
    coffee = call(alice, "remember", text="Drinks COFFEE black")["memory"]
    both = call(alice, "remember", text="drinks coffee at 7 with Oat milk")["memory"]
    call(alice, "remember", text="has a cat named Ada")
    assert call(alice, "recall", query="oat MILK coffee") == {
        "memories": [both, coffee],
        "count": 2,
    }
    assert call(alice, "recall", query="coffee")["count"] == 2
    assert call(alice, "recall", query="dog") == {"memories": [], "count": 0}


def test_recall_returns_at_most_ten_memories(alice: CallContext) -> None:
    for number in range(12):
        call(alice, "remember", text=f"fact number {number} about tea")
    result = call(alice, "recall", query="tea")
    assert result["count"] == len(result["memories"]) == 10


def test_like_wildcards_match_only_themselves(alice: CallContext) -> None:
    underscore = call(alice, "remember", text="username is ada_l")["memory"]
    call(alice, "remember", text="username was adaxl, discount 50%")
    assert call(alice, "recall", query="ada_l")["memories"] == [underscore]
    assert call(alice, "recall", query="_")["memories"] == [underscore]
    assert call(alice, "recall", query="%")["memories"] == []


def test_forget_removes_the_memory_with_the_id_remember_returned(alice: CallContext) -> None:
    kept = call(alice, "remember", text="lives in Lyon")["memory"]
    gone = call(alice, "remember", text="lives in Paris")["memory"]
    assert call(alice, "forget", memory_id=gone["id"]) == {"forgotten": gone["id"]}
    assert call(alice, "recall", query="lives")["memories"] == [kept]
    with pytest.raises(expediter.ToolError, match="no memory with id"):
        call(alice, "forget", memory_id=gone["id"])


def test_each_user_recalls_and_forgets_only_their_own_memories(scoped: Scoped) -> None:
    alice, bob = scoped("memory", user="alice"), scoped("memory", user="bob")
    hers = call(alice, "remember", text="birthday is in May")["memory"]
    his = call(bob, "remember", text="birthday is in June")["memory"]
    assert call(alice, "recall", query="birthday")["memories"] == [hers]
    assert call(bob, "recall", query="birthday")["memories"] == [his]
    with pytest.raises(expediter.ToolError, match="no memory with id"):
        call(bob, "forget", memory_id=hers["id"])
    assert call(alice, "recall", query="birthday")["memories"] == [hers]


def test_two_instances_of_the_tool_keep_separate_memories(scoped: Scoped) -> None:
    one, two = scoped("memory", instance="memory-1"), scoped("memory", instance="memory-2")
    fact = call(one, "remember", text="allergic to peanuts")["memory"]
    assert call(two, "recall", query="peanuts")["count"] == 0
    assert call(one, "recall", query="peanuts")["memories"] == [fact]


def test_calls_without_a_user_keep_their_own_memories(scoped: Scoped) -> None:
    anonymous, alice = scoped("memory", user=None), scoped("memory", user="alice")
    fact = call(anonymous, "remember", text="the office opens at nine")["memory"]
    assert call(alice, "recall", query="office")["count"] == 0
    assert call(anonymous, "recall", query="office")["memories"] == [fact]


@pytest.mark.parametrize("memory_id", ["nope", "x" * 10_000, "\x00", "\ud800"])
def test_an_unknown_id_is_a_tool_error_quoting_it_bounded(
    alice: CallContext, memory_id: str
) -> None:
    with pytest.raises(expediter.ToolError) as raised:
        call(alice, "forget", memory_id=memory_id)
    assert str(raised.value) == (
        f"no memory with id {echo(memory_id, 64)}; recall memories to see their ids"
    )
    assert len(str(raised.value)) < 200


@pytest.mark.parametrize(
    ("action", "name", "value", "fragment"),
    [
        ("remember", "text", "   ", "'text' is empty"),
        ("remember", "text", "😀" * 10_000, "'text' has 10,000 characters; the limit is 4,000"),
        ("recall", "query", "\x00", "'query' is empty"),
        ("recall", "query", "a" * 4_001, "'query' has 4,001 characters; the limit is 4,000"),
    ],
)
def test_empty_or_too_long_text_is_a_tool_error(
    alice: CallContext, action: str, name: str, value: str, fragment: str
) -> None:
    with pytest.raises(expediter.ToolError, match=fragment):
        call(alice, action, **{name: value})


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("likes\x00 jazz", "likes jazz"),
        ("likes \udc80 jazz", "likes \ufffd jazz"),
        ("🎷" * 3_995 + " jazz", "🎷" * 3_995 + " jazz"),
    ],
)
def test_hostile_text_is_kept_clean_and_recalled(alice: CallContext, text: str, kept: str) -> None:
    fact = call(alice, "remember", text=text)["memory"]
    assert fact["text"] == kept
    assert call(alice, "recall", query="JAZZ")["memories"] == [fact]


@pytest.mark.parametrize(
    ("action", "arguments"),
    [("remember", {"text": "x"}), ("recall", {"query": "x"}), ("forget", {"memory_id": "x"})],
)
def test_without_the_hosts_database_every_action_is_a_tool_error(
    action: str, arguments: dict[str, Any]
) -> None:
    with pytest.raises(expediter.ToolError, match="the memory tool needs the host's database"):
        call(CallContext(user_id="alice"), action, **arguments)


def test_a_host_without_a_database_reports_a_tool_error_and_asks_no_approval(call_tool) -> None:
    event = call_tool(memory, "forget", {"memory_id": "abc"}, user_id="alice")
    assert (event.status, event.error_type) == ("error", "ToolError")
    assert "record_calls=False" in (event.error or "")


def test_a_recording_host_keeps_each_users_memories(make_host) -> None:
    host = make_host(memory, record_calls=True)
    fact = host.call("memory", "remember", {"text": "likes jazz"}, user_id="alice")
    host.call("memory", "remember", {"text": "likes jazz too"}, user_id="bob")
    recalled = host.call("memory", "recall", {"query": "jazz"}, user_id="alice")
    assert (recalled.status, recalled.result) == (
        "completed",
        {"memories": [fact.result["memory"]], "count": 1},
    )
