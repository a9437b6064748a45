"""The built-in to-do list tool, on a real records store (SQLite and PostgreSQL)."""

from __future__ import annotations

from typing import Any

import pytest

import expediter
from expediter.core.records.text import echo
from expediter.hookspecs.tool import CallContext
from expediter.plugins import todo_list
from expediter.plugins.todo_list import TodoList

from .conftest import RecordingToolContract, Scoped


class TestTodoListContract(RecordingToolContract):
    tool = todo_list
    examples = {"add": {"text": "Book the flights"}, "list": {}}


def call(context: CallContext, action: str, **arguments: Any) -> Any:
    """Run an action through the tool's hooks, as a host does."""
    return TodoList().execute_action(action, arguments, context)


@pytest.fixture
def alice(scoped: Scoped) -> CallContext:
    return scoped("todo_list")


def test_add_returns_an_open_todo_with_its_id_and_times(alice: CallContext) -> None:
    todo = call(alice, "add", text="  book the flights ")["todo"]
    assert set(todo) == {"id", "text", "done", "created_at", "updated_at"}
    assert (todo["text"], todo["done"]) == ("book the flights", False)


def test_list_counts_open_and_done_todos_oldest_first(alice: CallContext) -> None:
    assert call(alice, "list") == {"todos": [], "open": 0, "done": 0}
    first = call(alice, "add", text="first")["todo"]
    second = call(alice, "add", text="second")["todo"]
    third = call(alice, "add", text="third")["todo"]
    done = call(alice, "complete", todo_id=second["id"])["todo"]
    assert call(alice, "list") == {"todos": [first, done, third], "open": 2, "done": 1}


def test_complete_marks_the_todo_done_and_twice_is_fine(alice: CallContext) -> None:
    todo = call(alice, "add", text="pay the rent")["todo"]
    done = call(alice, "complete", todo_id=todo["id"])["todo"]
    assert done == {**todo, "done": True, "updated_at": done["updated_at"]}
    assert done["updated_at"] >= todo["updated_at"]
    assert call(alice, "complete", todo_id=todo["id"]) == {"todo": done}


def test_delete_removes_the_todo_with_the_id_add_returned(alice: CallContext) -> None:
    kept = call(alice, "add", text="keep")["todo"]
    gone = call(alice, "add", text="drop")["todo"]
    assert call(alice, "delete", todo_id=gone["id"]) == {"deleted": gone["id"]}
    assert call(alice, "list")["todos"] == [kept]
    for action in ("delete", "complete"):
        with pytest.raises(expediter.ToolError, match="no to-do with id"):
            call(alice, action, todo_id=gone["id"])


def test_each_user_sees_and_changes_only_their_own_todos(scoped: Scoped) -> None:
    alice, bob = scoped("todo_list", user="alice"), scoped("todo_list", user="bob")
    hers = call(alice, "add", text="alice's errand")["todo"]
    his = call(bob, "add", text="bob's errand")["todo"]
    assert call(alice, "list")["todos"] == [hers]
    assert call(bob, "list")["todos"] == [his]
    for action in ("complete", "delete"):
        with pytest.raises(expediter.ToolError, match="no to-do with id"):
            call(bob, action, todo_id=hers["id"])
    assert call(alice, "list") == {"todos": [hers], "open": 1, "done": 0}


def test_two_instances_of_the_tool_keep_separate_lists(scoped: Scoped) -> None:
    work, home = (
        scoped("todo_list", instance="todo-work"),
        scoped("todo_list", instance="todo-home"),
    )
    at_work = call(work, "add", text="review the pull request")["todo"]
    call(home, "add", text="fix the tap")
    assert call(work, "list")["todos"] == [at_work]
    with pytest.raises(expediter.ToolError, match="no to-do with id"):
        call(home, "complete", todo_id=at_work["id"])


@pytest.mark.parametrize("action", ["complete", "delete"])
@pytest.mark.parametrize("todo_id", ["nope", "x" * 10_000, "a\x00b", "\udfff", ""])
def test_an_unknown_id_is_a_tool_error_quoting_it_bounded(
    alice: CallContext, action: str, todo_id: str
) -> None:
    with pytest.raises(expediter.ToolError) as raised:
        call(alice, action, todo_id=todo_id)
    assert str(raised.value) == (
        f"no to-do with id {echo(todo_id, 64)}; list the to-dos to see their ids"
    )
    assert len(str(raised.value)) < 200


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "'text' is empty"),
        ("\x00 \x1b", "'text' is empty"),
        ("😀" * 10_000, "'text' has 10,000 characters; the limit is 4,000"),
    ],
)
def test_empty_or_too_long_text_is_a_tool_error(
    alice: CallContext, text: str, fragment: str
) -> None:
    with pytest.raises(expediter.ToolError, match=fragment):
        call(alice, "add", text=text)
    assert call(alice, "list")["todos"] == []


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("milk\x00 and eggs", "milk and eggs"),
        ("\ud83d lone", "\ufffd lone"),
        ("🧹" * 4_000, "🧹" * 4_000),
    ],
)
def test_hostile_text_is_kept_clean_and_read_back(alice: CallContext, text: str, kept: str) -> None:
    todo = call(alice, "add", text=text)["todo"]
    assert todo["text"] == kept
    done = call(alice, "complete", todo_id=todo["id"])["todo"]
    assert (done["text"], done["done"]) == (kept, True)
    assert call(alice, "list")["todos"] == [done]


@pytest.mark.parametrize(
    ("action", "arguments"),
    [
        ("add", {"text": "x"}),
        ("list", {}),
        ("complete", {"todo_id": "x"}),
        ("delete", {"todo_id": "x"}),
    ],
)
def test_without_the_hosts_database_every_action_is_a_tool_error(
    action: str, arguments: dict[str, Any]
) -> None:
    with pytest.raises(expediter.ToolError, match="the todo_list tool needs the host's database"):
        call(CallContext(user_id="alice"), action, **arguments)


def test_a_host_without_a_database_reports_a_tool_error_and_asks_no_approval(call_tool) -> None:
    event = call_tool(todo_list, "delete", {"todo_id": "abc"}, user_id="alice")
    assert (event.status, event.error_type) == ("error", "ToolError")
    assert "record_calls=False" in (event.error or "")


def test_a_recording_host_keeps_each_users_todos(make_host) -> None:
    host = make_host(todo_list, record_calls=True)
    added = host.call("todo_list", "add", {"text": "alice's errand"}, user_id="alice")
    host.call("todo_list", "add", {"text": "bob's errand"}, user_id="bob")
    todo_id = added.result["todo"]["id"]
    done = host.call("todo_list", "complete", {"todo_id": todo_id}, user_id="alice")
    assert (done.status, done.result["todo"]["done"]) == ("completed", True)
    listed = host.call("todo_list", "list", {}, user_id="alice").result
    assert (listed["todos"], listed["open"], listed["done"]) == ([done.result["todo"]], 0, 1)
