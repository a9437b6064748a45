"""Pooled MCP client sessions: one open session per event loop, instance, subject (the invoker
or the owner, as the auth mode says) and full credential hash, reused across calls.

A session is opened under an asyncio lock (two calls that need it at once open it once) and
kept until it has been idle for ``IDLE_SECONDS``, it broke, or the server refused its
credentials. Sessions are bound to the loop that opened them: the host runs every async tool on
its background loop (``run``, ``call``, ``arun`` and ``acall`` alike), and a loop never touches
another's sessions.
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
from collections.abc import Awaitable, Callable, Iterable, Mapping
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
    "ResponseTooLarge",
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


class ResponseTooLarge(expediter.ToolError):
    """The server's answer was larger than the instance reads."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"the MCP server's answer is larger than {limit} bytes (the instance's "
            "max_response_bytes)"
        )


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
    """One open MCP client session on one event loop, shared by the calls that use it."""

    def __init__(self, key: tuple[Any, ...], make: Callable[[Session], Client[Any]]) -> None:
        self.key = key
        self.lock = asyncio.Lock()
        self._make = make
        self.client: Client[Any] | None = None
        #: The server answered a request of this session with HTTP 401.
        self.refused = False
        self.broken = False
        #: Calls using the session now: it is closed only when none is.
        self.users = 0
        #: Taken out of the pool: closed when its last user is done.
        self.retired = False
        #: What broke the session from inside its HTTP client (an answer over the cap): the
        #: SDK reports only "connection closed", so the call reports this instead.
        self.failure: expediter.ToolError | None = None
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


#: Seconds closing one session may take: the MCP SDK gives a stdio server 2 s to exit after
#: its stdin closes, 2 more after SIGTERM, and 2 to see a SIGKILL through.
CLOSE_SECONDS = 8.0


async def _quietly_close(client: Any) -> None:
    try:
        await asyncio.wait_for(client.__aexit__(None, None, None), CLOSE_SECONDS)
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
            for old in [item for item in list(self._loops) if item.is_closed()]:
                self._loops.pop(old, None)  # a closed loop's sessions are gone with it
            found = self._loops[loop] = OrderedDict()
        return found

    def session(self, key: tuple[Any, ...], make: Callable[[Session], Client[Any]]) -> Session:
        """This loop's session for ``key`` (made, not yet opened, when there is none)."""
        sessions = self._sessions()
        found = sessions.get(key)
        if found is not None and not found.broken and not found.refused:
            sessions.move_to_end(key)
            return found
        if found is not None:
            self._retire(sessions.pop(key))
        self._sweep(sessions)
        made = sessions[key] = Session(key, make)
        return made

    def evict(self, session: Session) -> None:
        """Take a session out of the pool (a later call opens a new one); it is closed as
        soon as no call uses it."""
        self._take(session)
        self._retire(session)

    def _take(self, session: Session) -> None:
        """Take a session out of this loop's pool; it is closed when its last call ends."""
        sessions = self._sessions()
        if sessions.get(session.key) is session:
            del sessions[session.key]
        session.retired = True

    def _sweep(self, sessions: OrderedDict[tuple[Any, ...], Session]) -> None:
        now = time.monotonic()
        for key, session in list(sessions.items()):
            idle = session.users == 0 and now - session.used_at > IDLE_SECONDS
            if idle or session.broken:
                self._retire(sessions.pop(key))
        for key in [key for key, item in sessions.items() if item.users == 0]:
            if len(sessions) < MAX_SESSIONS:
                break
            self._retire(sessions.pop(key))

    def _retire(self, session: Session) -> None:
        session.retired = True
        if session.users == 0:
            task = asyncio.get_running_loop().create_task(session.close())
            _closing.add(task)
            task.add_done_callback(_closing.discard)

    async def aclose(self, sessions: Iterable[Session] | None = None) -> None:
        """Retire this loop's sessions (``sessions``, or all): closed now when idle, else
        when their last call is done."""
        pooled = self._sessions()
        chosen = list(pooled.values()) if sessions is None else list(sessions)
        for session in chosen:
            self._take(session)
        # Closed here and awaited (a stdio server's process ends before this returns), with
        # the closes already under way on this loop.
        loop = asyncio.get_running_loop()
        pending = [task for task in _closing if task.get_loop() is loop]
        idle = [session.close() for session in chosen if session.users == 0]
        await asyncio.gather(*idle, *pending)

    def shutdown(
        self,
        sessions: Mapping[asyncio.AbstractEventLoop, Iterable[Session]] | None = None,
        timeout: float = CLOSE_SECONDS + 2,
    ) -> None:
        """Retire sessions (by loop; None: every session of every loop) from outside their
        loops, waiting up to ``timeout`` for each loop: a stdio server's process ends with
        its session."""
        chosen: dict[asyncio.AbstractEventLoop, Iterable[Session] | None] = (
            dict.fromkeys(list(self._loops)) if sessions is None else dict(sessions)
        )
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        for loop, some in chosen.items():
            if loop.is_closed() or not loop.is_running() or loop is running:
                continue  # a loop that is gone, or this one: it cannot be waited for here
            future = asyncio.run_coroutine_threadsafe(self.aclose(some), loop)
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
        *,
        repeatable: bool = False,
    ) -> T:
        """Run ``use`` with this loop's session for ``key``. A session the server refused
        (HTTP 401: the request was not run) is replaced and ``use`` tried once more; so is
        one whose connection broke, when opening it or, for a ``repeatable`` use (a
        listing), under ``use``. A request that may have reached the server (a tool call) is
        never sent twice."""
        for attempt in (1, 2):
            session = self.session(key, make)
            session.users += 1
            sent = False
            error: BaseException
            try:
                client = await session.open(timeout)
                sent = True
                return await use(client)
            except (EgressBlocked, expediter.ToolError):
                self.evict(session)
                raise
            except Exception as exc:
                error = exc
            finally:
                session.users -= 1
                session.used_at = time.monotonic()
                if session.retired and session.users == 0:
                    self._retire(session)
            blocked = session.failure or egress_cause(error)
            if blocked is not None:
                self.evict(session)
                raise blocked from None
            gone = session.refused or _closed(error)
            if gone:
                self.evict(session)
            again = session.refused if sent and not repeatable else gone
            if attempt == 1 and again:
                continue
            if session.refused:
                raise CredentialsRefused("the MCP server refused the credentials (HTTP 401)")
            raise error
        raise AssertionError("unreachable")


def _closed(exc: BaseException) -> bool:
    """Whether an error says the session's connection is gone (not a tool's own error)."""
    from mcp.shared.exceptions import MCPError

    if isinstance(exc, MCPError):
        return exc.error.code == _CONNECTION_CLOSED
    return isinstance(exc, ConnectionError | EOFError) or type(exc).__name__ in (
        "ClosedResourceError",
        "BrokenResourceError",
        "EndOfStream",
    )


#: The JSON-RPC code the MCP SDK gives a request whose connection closed.
_CONNECTION_CLOSED = -32000
#: Close tasks in flight (kept so they are not collected before they finish).
_closing: set[asyncio.Task[None]] = set()

#: The process's sessions (closed at exit, so stdio servers' processes end with it).
POOL = Pool()
atexit.register(POOL.shutdown)


def _capped(limit: int, session: Session) -> Callable[[Any], Awaitable[None]]:
    """An httpx response hook: the answer to a request (a JSON body, or the event stream
    that answers one POST) larger than ``limit`` bytes is ``ResponseTooLarge`` while it is
    read, noted on ``session``. The long-lived GET event stream of server notifications is
    left to the SDK, which caps each event."""
    import httpx2

    class Capped(httpx2.AsyncByteStream):
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        async def __aiter__(self) -> Any:
            seen = 0
            async for chunk in self.inner:
                seen += len(chunk)
                if seen > limit:
                    session.failure = ResponseTooLarge(limit)
                    raise session.failure
                yield chunk

        async def aclose(self) -> None:
            await self.inner.aclose()

    async def cap(response: Any) -> None:
        kind = response.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if kind == "text/event-stream" and response.request.method == "GET":
            return
        length = response.headers.get("content-length", "")
        if length.isdigit() and int(length) > limit:
            session.failure = ResponseTooLarge(limit)
            raise session.failure
        response.stream = Capped(response.stream)

    return cap


def guarded_factory(
    policy: EgressPolicy,
    session: Session,
    network: Any,
    *,
    watch_refusals: bool = True,
    max_bytes: int = 10_000_000,
) -> Callable[..., Any]:
    """The ``httpx_client_factory`` a fastmcp transport gets: an ``httpx2.AsyncClient`` that
    dials through the egress guard, follows no redirect, reads no answer over ``max_bytes``
    and (``watch_refusals``) tells ``session`` of a 401."""

    def factory(
        headers: Mapping[str, str] | None = None,
        auth: Any = None,
        timeout: Any = None,
        **_options: Any,
    ) -> Any:
        import httpx2

        from expediter.core.netguard import for_httpx2

        hooks: list[Callable[[Any], Awaitable[None]]] = [_capped(max_bytes, session)]
        if watch_refusals:
            hooks.append(session.on_response)
        # fastmcp asks for redirects to be followed; the guarded client follows none.
        return for_httpx2.async_client(
            policy,
            headers=dict(headers or {}),
            auth=auth,
            timeout=timeout if timeout is not None else httpx2.Timeout(30.0, read=300.0),
            inner=network,
            event_hooks={"response": hooks},
        )

    return factory
