"""Pooled MCP client sessions: one open session per event loop, instance, subject (the invoker
or the owner, as the auth mode says) and full credential hash, reused across calls.

A session is opened under an asyncio lock (two calls that need it at once open it once) and
kept until it has been idle for ``IDLE_SECONDS``, it broke, or the server refused its
credentials. Sessions are bound to the loop that opened them: the host's background loop for
``run``/``call``, the caller's loop for ``arun``; a loop never touches another's sessions.
Every network connection is dialed through expediter's egress guard (``netguard.for_httpx2``).
"""

from __future__ import annotations

import asyncio
import atexit
import hashlib
import json
import logging
import time
import weakref
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar, final

import expediter
from expediter.core.netguard import EgressPolicy
from expediter.errors import EgressBlocked

if TYPE_CHECKING:
    from fastmcp import Client

__all__ = [
    "IDLE_SECONDS",
    "MAX_SESSIONS",
    "CredentialsRefused",
    "Pool",
    "Session",
    "credential_hash",
    "egress_cause",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")
#: A session unused this long is closed when its loop next opens one.
IDLE_SECONDS = 300.0
#: Open sessions one loop keeps; the least recently used beyond this are closed.
MAX_SESSIONS = 64


class CredentialsRefused(expediter.ToolError):
    """The server answered HTTP 401 to a new session too: the credentials are wrong or
    expired."""


def credential_hash(values: Mapping[str, Any]) -> str:
    """A digest of every credential a session is opened with (the full values, never a
    prefix of them)."""
    text = json.dumps(values, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def egress_cause(exc: BaseException) -> EgressBlocked | expediter.ToolError | None:
    """The egress guard's refusal, or a ToolError the pack raised (e.g. "re-authorize"), behind
    an error fastmcp wrapped it in; None when there is neither."""
    seen: set[int] = set()
    stack: list[BaseException] = [exc]
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, EgressBlocked | expediter.ToolError):
            return current
        if isinstance(current, BaseExceptionGroup):
            stack.extend(current.exceptions)
        for linked in (current.__cause__, current.__context__):
            if linked is not None:
                stack.append(linked)
    return None


@final
class Session:
    """One open MCP client session on one event loop."""

    def __init__(self, key: tuple[Any, ...], make: Callable[[Session], Client[Any]]) -> None:
        self.key = key
        self.loop = asyncio.get_running_loop()
        self.lock = asyncio.Lock()
        self._make = make
        self.client: Client[Any] | None = None
        #: The server answered a request of this session with HTTP 401.
        self.refused = False
        self.broken = False
        self.used_at = time.monotonic()

    async def open(self, timeout: float) -> Client[Any]:
        """The session's client, connected (within ``timeout`` seconds)."""
        async with self.lock:
            if self.client is not None:
                return self.client
            client = self._make(self)
            try:
                await asyncio.wait_for(client.__aenter__(), timeout)  # type: ignore[no-untyped-call]
            except BaseException:
                self.broken = True
                await _quietly_close(client)
                raise
            self.client = client
            return client

    async def close(self) -> None:
        """Disconnect (errors are logged, not raised)."""
        client, self.client = self.client, None
        self.broken = True
        if client is not None:
            await _quietly_close(client)

    async def on_response(self, response: Any) -> None:
        """httpx event hook: note a 401 (the session is then replaced, once)."""
        if response.status_code == 401:
            self.refused = True


async def _quietly_close(client: Any) -> None:
    try:
        await asyncio.wait_for(client.__aexit__(None, None, None), 5.0)
    except BaseException as exc:  # closing a broken session must not fail the call
        if isinstance(exc, asyncio.CancelledError):
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise
        logger.info("closing an MCP session: %s", type(exc).__name__)


@final
class Pool:
    """The open sessions of each event loop, by key."""

    def __init__(self) -> None:
        self._loops: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, OrderedDict[tuple[Any, ...], Session]
        ] = weakref.WeakKeyDictionary()

    def _sessions(self) -> OrderedDict[tuple[Any, ...], Session]:
        loop = asyncio.get_running_loop()
        found = self._loops.get(loop)
        if found is None:
            found = self._loops[loop] = OrderedDict()
        return found

    def session(self, key: tuple[Any, ...], make: Callable[[Session], Client[Any]]) -> Session:
        """This loop's session for ``key`` (made, not yet opened, when there is none)."""
        sessions = self._sessions()
        found = sessions.get(key)
        if found is not None and not found.broken and not found.refused:
            sessions.move_to_end(key)
            found.used_at = time.monotonic()
            return found
        if found is not None:
            self._retire(sessions.pop(key))
        self._sweep(sessions)
        made = sessions[key] = Session(key, make)
        return made

    def evict(self, session: Session) -> None:
        """Close a session and forget it (a later call opens a new one)."""
        sessions = self._sessions()
        if sessions.get(session.key) is session:
            del sessions[session.key]
        self._retire(session)

    def _sweep(self, sessions: OrderedDict[tuple[Any, ...], Session]) -> None:
        now = time.monotonic()
        for key, session in list(sessions.items()):
            if now - session.used_at > IDLE_SECONDS or session.broken:
                self._retire(sessions.pop(key))
        while len(sessions) >= MAX_SESSIONS:
            self._retire(sessions.popitem(last=False)[1])

    def _retire(self, session: Session) -> None:
        task = asyncio.get_running_loop().create_task(session.close())
        _closing.add(task)
        task.add_done_callback(_closing.discard)

    async def aclose(self, instance_id: str | None = None) -> None:
        """Close this loop's sessions (of one instance, or all)."""
        sessions = self._sessions()
        found = [
            sessions.pop(key)
            for key in list(sessions)
            if instance_id is None or key[0] == instance_id
        ]
        await asyncio.gather(*(session.close() for session in found))

    def shutdown(self, instance_id: str | None = None, timeout: float = 5.0) -> None:
        """Close the sessions (of one instance, or all) on every loop that still runs, from
        outside those loops: a stdio server's process ends with its session."""
        for loop in list(self._loops.keys()):
            if loop.is_closed() or not loop.is_running():
                continue
            try:
                running = asyncio.get_running_loop()
            except RuntimeError:
                running = None
            if running is loop:
                continue  # cannot wait for a loop from inside it
            future = asyncio.run_coroutine_threadsafe(self.aclose(instance_id), loop)
            try:
                future.result(timeout)
            except Exception as exc:
                logger.info("closing MCP sessions: %s", type(exc).__name__)

    async def run(
        self,
        key: tuple[Any, ...],
        make: Callable[[Session], Client[Any]],
        use: Callable[[Client[Any]], Awaitable[T]],
        timeout: float,
    ) -> T:
        """Run ``use`` with this loop's session for ``key``; when the server refused the
        session's credentials (HTTP 401), or the session broke before ``use`` got an answer,
        replace it and run ``use`` once more."""
        for attempt in (1, 2):
            session = self.session(key, make)
            try:
                client = await session.open(timeout)
                return await use(client)
            except (EgressBlocked, expediter.ToolError):
                self.evict(session)
                raise
            except Exception as exc:
                blocked = egress_cause(exc)
                if blocked is not None:
                    self.evict(session)
                    raise blocked from None
                if attempt == 1 and (session.refused or _closed(exc)):
                    self.evict(session)
                    continue
                if session.refused:
                    self.evict(session)
                    raise CredentialsRefused(
                        "the MCP server refused the credentials (HTTP 401)"
                    ) from None
                if _closed(exc):
                    self.evict(session)
                raise
        raise AssertionError("unreachable")


def _closed(exc: BaseException) -> bool:
    """Whether an error says the session's connection is gone (not a tool's own error)."""
    from mcp.shared.exceptions import MCPError

    if isinstance(exc, MCPError):
        return exc.error.code == -32000 or "closed" in str(exc).lower()
    return isinstance(exc, ConnectionError | EOFError) or type(exc).__name__ in (
        "ClosedResourceError",
        "BrokenResourceError",
        "EndOfStream",
    )


#: Close tasks in flight (kept so they are not collected before they finish).
_closing: set[asyncio.Task[None]] = set()

#: The process's sessions (closed at exit, so stdio servers' processes end with it).
POOL = Pool()
atexit.register(POOL.shutdown)


def guarded_factory(
    policy: EgressPolicy, session: Session, network: Any, *, watch_refusals: bool = True
) -> Callable[..., Any]:
    """The ``httpx_client_factory`` a fastmcp transport gets: an ``httpx2.AsyncClient`` that
    dials through the egress guard, follows no redirect, and (``watch_refusals``) tells
    ``session`` of a 401."""

    def factory(
        headers: Mapping[str, str] | None = None,
        auth: Any = None,
        timeout: Any = None,
        **_options: Any,
    ) -> Any:
        import httpx2

        from expediter.core.netguard import for_httpx2

        # fastmcp asks for redirects to be followed; the guarded client follows none.
        return for_httpx2.async_client(
            policy,
            headers=dict(headers or {}),
            auth=auth,
            timeout=timeout if timeout is not None else httpx2.Timeout(30.0, read=300.0),
            inner=network,
            event_hooks={"response": [session.on_response] if watch_refusals else []},
        )

    return factory
