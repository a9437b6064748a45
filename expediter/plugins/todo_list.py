"""To-do list: things the user means to do, checked off when done, each user's their own."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import expediter
from expediter.plugins._kept import collection, kept_text, known_id, unknown_id

if TYPE_CHECKING:
    from expediter.core.instances.storage import Collection

_NOUN = "to-do"
_HINT = "list the to-dos to see their ids"


def _todos(context: expediter.CallContext) -> Collection:
    return collection(context, "todo_list", "todos")


class TodoList(expediter.Toolbox):
    """Keep the user's to-do list: add items, check them off, and list what is left."""

    user_scoped = True

    @expediter.action
    def add(self, text: str, context: expediter.CallContext) -> dict[str, Any]:
        """Add an item to the user's to-do list when they mention something they need to do.

        Args:
            text: What is to be done, in a few words (at most 4,000 characters).
        """
        item = kept_text(text)
        record = _todos(context).add({"text": item, "done": False}, text=item)
        return {"todo": record.to_dict()}

    @expediter.action
    def list(self, context: expediter.CallContext) -> dict[str, Any]:
        """List the user's to-dos, oldest first, with their ids and whether each is done."""
        todos = [record.to_dict() for record in _todos(context).list()]
        done = sum(1 for todo in todos if todo.get("done") is True)
        return {"todos": todos, "open": len(todos) - done, "done": done}

    @expediter.action
    def complete(self, todo_id: str, context: expediter.CallContext) -> dict[str, Any]:
        """Mark a to-do as done when the user says they did it (it stays on the list).

        Args:
            todo_id: The to-do's id, as add or list returned it.
        """
        key = known_id(todo_id, _NOUN, _HINT)
        todos = _todos(context)
        record = todos.get(key)
        if record is not None and record.data.get("done") is not True:
            record = todos.update(key, {**record.data, "done": True}, text=record.data.get("text"))
        if record is None:
            raise unknown_id(todo_id, _NOUN, _HINT)
        return {"todo": record.to_dict()}

    @expediter.action
    def delete(self, todo_id: str, context: expediter.CallContext) -> dict[str, str]:
        """Remove a to-do from the list when the user no longer wants it there.

        Args:
            todo_id: The to-do's id, as add or list returned it.
        """
        key = known_id(todo_id, _NOUN, _HINT)
        if not _todos(context).delete(key):
            raise unknown_id(todo_id, _NOUN, _HINT)
        return {"deleted": key}
