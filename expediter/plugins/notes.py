"""Notes: short texts a user asks to keep, listed and searched later, each user's their own."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import expediter
from expediter.plugins._kept import collection, kept_text, known_id, unknown_id

if TYPE_CHECKING:
    from expediter.core.instances.storage import Collection

__all__ = ["Notes"]

_HINT = "list the notes to see their ids"


def _notes(context: expediter.CallContext) -> Collection:
    return collection(context, "notes", "notes")


class Notes(expediter.Toolbox):
    """Keep short notes for the user and find them again later."""

    user_scoped = True

    @expediter.action
    def add(self, text: str, context: expediter.CallContext) -> dict[str, Any]:
        """Keep a note when the user asks you to note, jot down or save something.

        Args:
            text: The note, as the user would want to read it later (at most 4,000 characters).
        """
        note = kept_text(text)
        record = _notes(context).add({"text": note}, text=note)
        return {"note": record.to_dict()}

    @expediter.action
    def list(self, context: expediter.CallContext) -> dict[str, Any]:
        """List all of the user's notes, oldest first, with their ids."""
        notes = [record.to_dict() for record in _notes(context).list()]
        return {"notes": notes, "count": len(notes)}

    @expediter.action
    def search(self, query: str, context: expediter.CallContext) -> dict[str, Any]:
        """Find the user's notes holding any of the query's words, best matches first.

        Args:
            query: Words to look for (case does not matter).
        """
        found = _notes(context).search(kept_text(query, "query"))
        notes = [record.to_dict() for record in found]
        return {"notes": notes, "count": len(notes)}

    @expediter.action
    def delete(self, note_id: str, context: expediter.CallContext) -> dict[str, str]:
        """Delete a note when the user asks to remove it.

        Args:
            note_id: The note's id, as add, list or search returned it.
        """
        key = known_id(note_id, "note", _HINT)
        if not _notes(context).delete(key):
            raise unknown_id(note_id, "note", _HINT)
        return {"deleted": key}
