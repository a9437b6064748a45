"""Memory: facts about the user worth remembering across conversations, each user's their own."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import expediter
from expediter.plugins._kept import collection, kept_text, known_id, unknown_id

if TYPE_CHECKING:
    from expediter.core.instances.storage import Collection

#: The most memories one recall returns.
RECALL_LIMIT = 10
_NOUN = "memory"
_HINT = "recall memories to see their ids"


def _memories(context: expediter.CallContext) -> Collection:
    return collection(context, "memory", "memories")


class Memory(expediter.Toolbox):
    """Remember facts and preferences the user shares, and recall them in later conversations."""

    user_scoped = True

    @expediter.action
    def remember(self, text: str, context: expediter.CallContext) -> dict[str, Any]:
        """Remember a fact or preference the user shares that will matter in later conversations.

        Write it so it reads well on its own ("prefers metric units", "daughter is named Ada").

        Args:
            text: The fact to remember, one per call (at most 4,000 characters).
        """
        fact = kept_text(text)
        record = _memories(context).add({"text": fact}, text=fact)
        return {"memory": record.to_dict()}

    @expediter.action
    def recall(self, query: str, context: expediter.CallContext) -> dict[str, Any]:
        """Recall what you remembered about a subject before answering a question that may
        depend on it; the best matches come first (at most 10).

        Args:
            query: Words about the subject, e.g. 'units preferences' (case does not matter).
        """
        found = _memories(context).search(kept_text(query, "query"), limit=RECALL_LIMIT)
        memories = [record.to_dict() for record in found]
        return {"memories": memories, "count": len(memories)}

    @expediter.action
    def forget(self, memory_id: str, context: expediter.CallContext) -> dict[str, str]:
        """Forget a memory when the user asks you to or it is no longer true.

        Args:
            memory_id: The memory's id, as remember or recall returned it.
        """
        key = known_id(memory_id, _NOUN, _HINT)
        if not _memories(context).delete(key):
            raise unknown_id(memory_id, _NOUN, _HINT)
        return {"forgotten": key}
