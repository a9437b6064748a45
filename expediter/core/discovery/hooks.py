"""The host plugins' hooks as the call pipeline asks them (``HostHooks``).

The host builds its plugin manager (packs implementing host hooks, and ``Host(plugins=...)``
objects) and hands it in; the pipeline asks this object, never the host. Which hooks are
implemented is asked once: the host's plugins are fixed once it is built.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, final

from expediter.core.discovery.loading import wrapper_shims

if TYPE_CHECKING:
    import pluggy

    from expediter.hookspecs.tool import Action, CallContext

__all__ = ["HostHooks"]

logger = logging.getLogger(__name__)


@final
class HostHooks:
    """Asks the host plugins: policies, observers, result normalizers, secrets, wrappers."""

    def __init__(self, manager: Callable[[], pluggy.PluginManager]) -> None:
        self._manager_factory = manager
        self._manager: pluggy.PluginManager | None = None
        self._present: dict[str, bool] = {}
        self._wrappers: list[object] | None = None

    @property
    def manager(self) -> pluggy.PluginManager:
        """The host's plugin manager (built on first use)."""
        if self._manager is None:
            self._manager = self._manager_factory()
        return self._manager

    def has_hook(self, name: str) -> bool:
        """Whether any host plugin implements the hook (asked once per hook)."""
        found = self._present.get(name)
        if found is None:
            caller = getattr(self.manager.hook, name, None)
            found = bool(caller is not None and caller.get_hookimpls())
            self._present[name] = found
        return found

    def notify(self, event: object) -> None:
        """Tell every ``on_call_event`` observer; one that raises is logged and skipped."""
        if not self.has_hook("on_call_event"):
            return
        for impl in self.manager.hook.on_call_event.get_hookimpls():
            try:
                impl.function(*[{"event": event}[name] for name in impl.argnames])
            except Exception as exc:
                logger.error(
                    "on_call_event observer %s raised %s; ignored",
                    impl.plugin_name,
                    type(exc).__name__,
                    exc_info=exc,
                )

    def policies(self, call: object, action: Action, context: CallContext) -> list[Any]:
        """Every ``tool_call_policy`` answer for a call (exceptions propagate: fail closed)."""
        if not self.has_hook("tool_call_policy"):
            return []
        return list(self.manager.hook.tool_call_policy(call=call, action=action, context=context))

    def authorize(self, key: str, call: object, approver: str | None, approved: bool) -> bool:
        """Whether every ``authorize_decision`` answer lets ``approver`` decide the call (an
        implementation that raises refuses: fail closed)."""
        if not self.has_hook("authorize_decision"):
            return True
        try:
            answers = self.manager.hook.authorize_decision(
                key=key, call=call, approver=approver, approved=approved
            )
        except Exception as exc:
            logger.error("authorize_decision raised %s; refused", type(exc).__name__, exc_info=exc)
            return False
        return all(answer is not False for answer in answers)

    def normalize(self, tool: str | None, action: str | None, result: Any) -> Any:
        """The first ``normalize_result`` answer, or None."""
        if not self.has_hook("normalize_result"):
            return None
        return self.manager.hook.normalize_result(tool=tool, action=action, result=result)

    def secret(self, name: str, context: CallContext) -> str | None:
        """A named secret from the ``resolve_secret`` providers, or None."""
        if not self.has_hook("resolve_secret"):
            return None
        value = self.manager.hook.resolve_secret(name=name, context=context)
        return value if isinstance(value, str) else None

    def wrappers(self) -> list[object]:
        """The host-wide ``execute_action`` wrappers, one object each (for tool relays)."""
        if self._wrappers is None:
            self._wrappers = wrapper_shims(self.manager)
        return self._wrappers
