"""The host's toolset for one user, as MCP tools, and an MCP client's calls run through the
host's one pipeline.

Nothing here imports fastmcp: ``provider`` wraps a ``Bridge`` as a fastmcp server. Every
listing builds the user's toolset afresh from the host (so a stored instance added or removed
by another process shows up on the next listing), and every call runs in the toolset that
named it, with a fresh call id: one ledger row per MCP request.

When the installed tools change, the bridge builds a new host for the next listing; the host
it replaces is closed once the calls running in its toolsets have ended (never the host the
bridge was given: its owner closes that one).
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import secrets
import string
import threading
import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from expediter_mcp.serving.arguments import ArgumentCheck

if TYPE_CHECKING:
    from expediter.core.host import Host
    from expediter.core.records.calls import CallEvent, ToolCall
    from expediter.core.turns.toolset import OfferedAction, Toolset

__all__ = ["Bridge", "Offer", "Reply", "approval_text"]

logger = logging.getLogger(__name__)

#: The provider whose schemas are offered: OpenAI's function parameters are the action's
#: JSON Schema as the model sees it (framework keys and fixed values stripped), unchanged.
SCHEMA_PROVIDER = "openai"
#: Calls waiting for a decision at once (``--approval-wait``), each holding a thread.
WAITERS = 32
_ID_CHARS = string.ascii_letters + string.digits


@attrs.frozen
class Offer:
    """One action of the toolset, as an MCP tool: its name, description and input schema."""

    name: str
    description: str
    #: The action's parameters as the model sees them (a private copy).
    parameters: dict[str, Any]
    #: None for a name the toolset does not offer (the pipeline refuses the call).
    offered: OfferedAction | None
    #: The toolset that offered it: a call runs in it.
    toolset: Toolset
    #: The host that built the toolset (kept open while a call runs in it).
    host: Host


@attrs.frozen
class Reply:
    """What an MCP client gets back: text, structured content for a JSON object result, and
    whether it is an error; ``blocks``, when set, replace the text (the content of a result
    that an ``mcp`` instance's server gave, passed on as MCP content: ``results``' JSON form
    of text, image, audio, resource and resource-link blocks)."""

    text: str
    structured: dict[str, Any] | None = None
    is_error: bool = False
    blocks: tuple[Mapping[str, Any], ...] | None = None


def approval_text(reason: str | None, *, waited: float | None = None) -> str:
    """The refusal of a call that waits for a human's decision, as the client reads it: an
    operator decides. The client is often an agent with a shell, so neither the call's key
    nor the command that approves it is named (the operator finds both in the server's log
    and in ``expediter approvals ls``)."""
    why = f" ({reason})" if reason else ""
    text = (
        f"refused for now: the call needs a human's approval{why}: an operator of this "
        "server has to decide on it, and it runs only if they approve it"
    )
    if waited is not None:
        text += f"; still waiting: no decision came within {waited:g} seconds"
    return text


def _tell_operator(event: CallEvent) -> None:
    """Log, for the operator only, which call waits and how to decide it."""
    logger.warning(
        "call %s (%s) waits for an operator's decision: expediter approve %s, or expediter deny %s",
        event.name,
        event.reason or "needs approval",
        event.key,
        event.key,
    )


class Bridge:
    """Offers the host's toolset for one user and runs an MCP client's calls in it."""

    def __init__(self, host: Host, *, user_id: str | None, approval_wait: float | None) -> None:
        #: The host offered now (rebuilt when the installed tools change).
        self.host = host
        self.user_id = user_id
        #: Seconds a call waiting for approval is waited for (None: refused at once).
        self.approval_wait = approval_wait
        self._check = ArgumentCheck()
        self._waiters: Any = None  # an anyio CapacityLimiter, made on the server's loop
        #: The host the bridge was given: never closed here.
        self._given = host
        # Listings run in worker threads, calls on the server's loop. ``_lock`` guards
        # ``host``, ``_users`` and ``_draining`` (held briefly, never while a host is built
        # or closed); ``_rebuilding`` lets one thread at a time build a host.
        self._lock = threading.Lock()
        self._rebuilding = threading.Lock()
        #: Listings and calls using each host now (a host appears while it has any).
        self._users: dict[Host, int] = {}
        #: Replaced hosts still in use: each is closed when its last user ends.
        self._draining: list[Host] = []

    def close(self) -> None:
        """Close the hosts this bridge built (not the one it was given), in use or not: the
        server has stopped. The bridge then offers the given host again."""
        with self._lock:
            hosts = [*self._draining]
            if self.host is not self._given:
                hosts.append(self.host)
            self.host = self._given
            self._draining.clear()
        for host in hosts:
            _close(host)

    # -- which host is in use (any thread) -----------------------------------------------------

    def _alive(self, host: Host) -> bool:
        """Whether ``host`` is still open (call with ``_lock`` held)."""
        return host is self.host or host is self._given or host in self._draining

    def _use(self, host: Host) -> bool:
        """Count one more user of ``host``; False (nothing counted) when it is closed or
        being closed."""
        with self._lock:
            if not self._alive(host):
                return False
            self._users[host] = self._users.get(host, 0) + 1
            return True

    def _done(self, host: Host) -> Host | None:
        """Count one user of ``host`` less; the host to close now (its last user of a
        replaced host has ended), or None."""
        with self._lock:
            left = self._users[host] - 1
            if left:
                self._users[host] = left
                return None
            del self._users[host]
            if host in self._draining:
                self._draining.remove(host)
                return host
            return None

    def _replace(self, old: Host, new: Host) -> Host | None:
        """Make ``new`` the offered host; ``old``, when it is to be closed now."""
        with self._lock:
            self.host = new
            if old is self._given:
                return None  # its owner closes it
            if old in self._users:
                self._draining.append(old)  # closed when its last user ends
                return None
            return old

    # -- offering (sync: run it in a worker thread, it reads the database) --------------------

    def _rebuild(self, seen: Host) -> None:
        """Build a new host for the installed tools, unless another thread already replaced
        ``seen``; close the one replaced once it is not in use."""
        with self._rebuilding:
            if self.host is not seen:
                return
            import importlib

            from expediter.core.host import Host

            importlib.invalidate_caches()  # let the import system see new distributions
            retired = self._replace(seen, Host(config=seen.config))
            logger.info("installed tools changed: serving the new set")
        if retired is not None:
            _close(retired)

    def _current_host(self) -> Host:
        """The host to offer, counted as in use (``_done`` when finished with it): rebuilt
        (once per listing) when installed packs or tools directories changed since it was
        built."""
        checked = False
        while True:
            host = self.host
            if not checked and host.discovery_changed():
                self._rebuild(host)
                checked = True
                continue
            with self._lock:
                if host is self.host:
                    self._users[host] = self._users.get(host, 0) + 1
                    return host

    @contextlib.contextmanager
    def _toolset(self) -> Iterator[tuple[Host, Toolset]]:
        """The user's toolset, built afresh, and its host (kept open meanwhile)."""
        host = self._current_host()
        try:
            # An instance that cannot be offered is logged by the host, once, with its reason.
            yield host, host.toolset(user_id=self.user_id, headless=False)
        finally:
            retired = self._done(host)
            if retired is not None:
                _close(retired)

    def offers(self) -> list[Offer]:
        """The user's toolset, built afresh, as one offer per action."""
        with self._toolset() as (host, toolset):
            functions = _functions(toolset)
            return [
                _offer(host, toolset, offered, functions[offered.name])
                for offered in toolset.actions
                if offered.name in functions
            ]

    def offer(self, name: str) -> Offer:
        """What a call of ``name`` runs in the user's toolset now: the action offered under
        that name, or (``offered`` None) a name the pipeline refuses, listing what is offered."""
        with self._toolset() as (host, toolset):
            offered = toolset.offered(name)
            function = None if offered is None else _functions(toolset).get(name)
            if offered is None or function is None:
                return Offer(name, "", {"type": "object", "properties": {}}, None, toolset, host)
            return _offer(host, toolset, offered, function)

    # -- calling (on the server's event loop) --------------------------------------------------

    async def call(self, offer: Offer, arguments: Mapping[str, Any]) -> Reply:
        """Run one call through the host's pipeline and map its final event to a reply. The
        offer's host stays open until the call ends; an offer whose host was closed meanwhile
        (replaced between the lookup and the call) is looked up again in the current one."""
        import anyio
        import anyio.to_thread

        while not self._use(offer.host):
            offer = await anyio.to_thread.run_sync(self.offer, offer.name)
        try:
            return await self._run(offer, arguments)
        finally:
            retired = self._done(offer.host)
            if retired is not None:
                # Closing reads and writes files: not on the loop, and not cut short.
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(_close, retired)

    async def _run(self, offer: Offer, arguments: Mapping[str, Any]) -> Reply:
        from expediter.core.records.calls import ToolCall

        call_id = "mcp_" + "".join(secrets.choice(_ID_CHARS) for _ in range(12))
        offered = offer.offered
        if offered is None:
            # Not offered (any more): refused by the pipeline, with its row and its message.
            call = ToolCall(call_id, offer.name, dict(arguments))
        else:
            call = self._resolved(call_id, offer, offered, arguments)
        event: CallEvent | None = None
        # ``arun``: a sync tool runs on a worker thread within the host's call timeout, an
        # async one on this loop; closing the iteration (a cancelled request) cancels it.
        events = offer.toolset.arun([call])
        try:
            async for item in events:
                event = item
        finally:
            close = getattr(events, "aclose", None)
            if close is not None:
                await close()
        if event is None:  # arun yields one event per call; never expected
            return Reply("expediter returned no outcome for the call", is_error=True)
        if event.status == "awaiting_approval":
            return await self._after_approval(event, offer.host)
        return self.reply(event, offer.host)

    def _resolved(
        self, call_id: str, offer: Offer, offered: OfferedAction, arguments: Mapping[str, Any]
    ) -> ToolCall:
        """The call of an offered action, refused (``error``) when its arguments do not fit
        the schema offered."""
        from expediter.core.records.calls import ToolCall
        from expediter.core.records.redaction import redact
        from expediter.core.turns.providers.jsonschema import strip_optional_nulls

        action = offered.action
        given = strip_optional_nulls(dict(arguments), action.parameters)
        problem = self._check.problem(offer.name, action, offer.parameters, given)
        return ToolCall(
            call_id=call_id,
            name=offer.name,
            # A refused call never runs: it is recorded with the action's secrets hidden.
            arguments=given if problem is None else redact(given, action.secret_parameters),
            instance_id=offered.instance_id,
            tool=offered.tool,
            action=action.name,
            error=problem,
        )

    async def _after_approval(self, event: CallEvent, host: Host) -> Reply:
        """Refuse a call that waits for approval, or wait (``approval_wait``) for the
        decision, made in another process, and return the call's final outcome."""
        wait = self.approval_wait
        _tell_operator(event)
        if wait is None:
            return Reply(approval_text(event.reason), is_error=True)
        import anyio
        import anyio.to_thread

        if self._waiters is None:
            self._waiters = anyio.CapacityLimiter(WAITERS)
        deadline = time.monotonic() + wait

        def until_decided() -> dict[str, CallEvent]:
            # The time spent queueing for a thread counts against the wait.
            return host.wait([event.key], max(0.0, deadline - time.monotonic()))

        final = await anyio.to_thread.run_sync(
            until_decided, limiter=self._waiters, abandon_on_cancel=True
        )
        outcome = final.get(event.key)
        if outcome is None:
            return Reply(approval_text(event.reason, waited=wait), is_error=True)
        return self.reply(outcome, host)

    def reply(self, event: CallEvent, host: Host | None = None) -> Reply:
        """A final event as an MCP result: the model's copy of a result, or the error
        (``host``: the one the call ran in, by default the current one)."""
        budget = (self.host if host is None else host).model_result_chars
        if event.status == "completed":
            if event.tool == "mcp" and type(event.result) is dict:
                proxied = _proxied(event.result, budget)
                if proxied is not None:
                    return proxied
            text = event.content
            if text is None:  # every completed event carries it; this is a safety net
                from expediter.core.records.text import model_copy

                text = model_copy(event.result, budget)
            structured = event.result if type(event.result) is dict else None
            if structured is not None and len(text) >= budget:
                structured = None  # the text was cut to the model's budget: so is the result
            return Reply(text, structured)
        if event.status == "denied":
            return Reply(f"denied: {event.error or event.reason or 'no reason given'}", None, True)
        if event.status == "awaiting_approval":
            return Reply(approval_text(event.reason), None, True)
        if event.status == "error":
            return Reply(event.error or "the call failed", None, True)
        # requires_client_execution needs client tools, which a server never offers.
        return Reply(
            f"the call ended as {event.status!r}, which a server cannot answer", None, True
        )


def _proxied(result: Mapping[str, Any], budget: int) -> Reply | None:
    """The result of an ``mcp`` instance's call as the content its server gave (not the
    pack's JSON envelope as text), within the model's budget of characters: a text over it is
    cut, an image or audio over it left out with a note; None when the result has no content
    list."""
    content = result.get("content")
    if not isinstance(content, list):
        return None
    blocks: list[Mapping[str, Any]] = []
    left = budget
    cut = False
    for block in content:
        if not isinstance(block, Mapping):
            continue
        if block.get("type") == "text":
            text = str(block.get("text", ""))
            if len(text) > left:
                text, cut = text[: max(0, left)] + " [cut: over the result budget]", True
            blocks.append({"type": "text", "text": text})
            left -= len(text)
            continue
        size = len(json.dumps(block, ensure_ascii=False))
        if size > left:
            cut = True
            kind = str(block.get("type") or "content")[:40]
            blocks.append({"type": "text", "text": f"[{kind} content over the result budget]"})
            continue
        blocks.append(block)
        left -= size
    structured = result.get("structured_content")
    if type(structured) is not dict or cut or len(json.dumps(structured)) > budget:
        structured = None
    return Reply("", structured, blocks=tuple(blocks))


def _functions(toolset: Toolset) -> dict[str, Mapping[str, Any]]:
    """The toolset's function definitions by name (cached by the host per action)."""
    return {
        str(item["function"]["name"]): item["function"] for item in toolset.schemas(SCHEMA_PROVIDER)
    }


def _close(host: Host) -> None:
    """Close a host the bridge built; a failure is logged (it must not fail a call)."""
    try:
        host.close()
    except Exception:
        logger.warning("closing a replaced host failed", exc_info=True)


def _offer(
    host: Host, toolset: Toolset, offered: OfferedAction, function: Mapping[str, Any]
) -> Offer:
    return Offer(
        name=offered.name,
        description=offered.action.description,
        # Deep-copied: the host's cached schemas are read-only and shared.
        parameters=copy.deepcopy(dict(function["parameters"])),
        offered=offered,
        toolset=toolset,
        host=host,
    )
