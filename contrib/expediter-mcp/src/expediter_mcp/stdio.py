"""A stdio MCP server as a fastmcp transport whose limits hold while the server's stdout is
read.

The MCP SDK's stdio client gathers a line of any length before it looks at it, and a line it
cannot parse is only logged, so the request it answered waits out its timeout. Here the
pack reads the server's stdout itself:

- a line longer than the instance's ``max_response_bytes`` ends the session as soon as that
  many bytes have come (``ResponseTooLarge``), with no more than that held;
- a line that is not a JSON-RPC message (the MCP spec lets a stdio server write nothing else
  to stdout) ends the session at once, with an error saying so;
- either way the calls waiting on the session fail then, with that error (the pool reads it
  from ``Session.failure``), and the next call starts the server again.

The server process is started and stopped with the SDK's own helpers (a process group of its
own, the MCP shutdown sequence, the environment's safe list); they are private to the SDK
(``mcp.client.stdio``), which the pinned fastmcp release brings, and tested with it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import anyio
import mcp_types
import pydantic
from fastmcp.client.transports.base import ClientTransport
from mcp.client.stdio import (
    _create_platform_compatible_process,
    _get_executable_command,
    _stop_server_process,
    get_default_environment,
)
from mcp.shared.message import SessionMessage

import expediter
from expediter_mcp.sessions import ResponseTooLarge, Session
from expediter_mcp.wire import CheckedSession

__all__ = ["StdioServer", "not_a_message"]

logger = logging.getLogger(__name__)

#: Seconds the writer has to pass on what the session already gave it before stdin closes.
_FLUSH_SECONDS = 0.5


def not_a_message(detail: str) -> expediter.ToolError:
    """The error of a session whose server wrote a line that is not a JSON-RPC message."""
    return expediter.ToolError(
        f"the stdio server wrote a line that is not a JSON-RPC message ({detail}); a stdio "
        "server's stdout carries MCP messages only"
    )


def parse_line(line: bytes) -> SessionMessage | expediter.ToolError | None:
    """One line of the server's stdout as a message, the error it is, or None (a blank
    line). JSON nested deeper than the SDK's parser goes (about 200 levels) is parsed by
    Python's, so a listing with one very deep tool still arrives and that tool alone is left
    out (``expediter_mcp.wire``)."""
    if not line.strip():
        return None
    adapter = mcp_types.jsonrpc_message_adapter
    try:
        return SessionMessage(adapter.validate_json(line, by_name=False))
    except pydantic.ValidationError as exc:
        found = exc.errors()[0]
        deep = found.get("type") == "json_invalid" and "recursion limit" in found.get("msg", "")
        if not deep:
            invalid = found.get("type") == "json_invalid"
            return not_a_message("it is not JSON" if invalid else "it is JSON, not JSON-RPC")
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):
        return not_a_message("it is not JSON, or nests too deep")
    try:
        return SessionMessage(adapter.validate_python(value, by_name=False))
    except (pydantic.ValidationError, RecursionError):
        return not_a_message("it is JSON, not JSON-RPC")


class _Reader:
    """Reads the server's stdout line by line into the session, holding at most ``limit``
    bytes of a line; after a fault (or once the session is gone) it reads on and drops what
    comes, so that a server still writing can see its stdin close and exit."""

    def __init__(
        self,
        stdout: Any,
        sink: Any,
        limit: int,
        fail: Callable[[expediter.ToolError], None],
    ) -> None:
        self.stdout = stdout
        self.sink = sink
        self.limit = limit
        self.fail = fail
        self.delivering = True
        #: The transport is stopping the server (so a closed stdout is expected).
        self.closing = False

    async def run(self) -> None:
        line = bytearray()
        try:
            while True:
                try:
                    chunk = await self.stdout.receive()
                except anyio.EndOfStream:
                    break
                start = 0
                while self.delivering:
                    end = chunk.find(b"\n", start)
                    line += chunk[start:] if end < 0 else chunk[start:end]
                    if len(line) > self.limit:
                        line = bytearray()
                        await self._stop(ResponseTooLarge(self.limit))
                        break
                    if end < 0:
                        break
                    start = end + 1
                    item = parse_line(bytes(line))
                    line.clear()
                    if isinstance(item, expediter.ToolError):
                        await self._stop(item)
                    elif item is not None:
                        await self._deliver(item)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError) as exc:
            # Closed under the read by the transport's own shutdown, or broken mid-session;
            # either way the session sees its input end.
            if not self.closing:
                logger.warning("reading a stdio MCP server's stdout failed: %r", exc)
        finally:
            await self.sink.aclose()

    async def _deliver(self, item: SessionMessage) -> None:
        try:
            await self.sink.send(item)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            self.delivering = False  # the session is gone: only the draining remains

    async def _stop(self, error: expediter.ToolError) -> None:
        """End the session's input: its waiting calls fail now, with ``error``."""
        self.delivering = False
        self.fail(error)
        await self.sink.aclose()


async def _write(process: Any, source: Any, sink: Any, done: anyio.Event) -> None:
    """Pass the session's messages to the server's stdin, one line each."""
    try:
        async with source:
            async for item in source:
                text = item.message.model_dump_json(by_alias=True, exclude_unset=True)
                await process.stdin.send(text.encode("utf-8") + b"\n")
    except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
        # The server stopped reading: the session sees its input end rather than wait.
        await sink.aclose()
    finally:
        done.set()


@contextlib.asynccontextmanager
async def _streams(
    command: str, args: Sequence[str], limit: int, fail: Callable[[expediter.ToolError], None]
) -> AsyncIterator[tuple[Any, Any]]:
    """Start the server and give the session's two streams; the server is stopped (the MCP
    shutdown sequence) when the block ends, however it ends."""
    process = await _create_platform_compatible_process(
        command=await _get_executable_command(command),
        args=list(args),
        env=get_default_environment(),
        errlog=sys.stderr,
    )
    # No await between the spawn and the task group: a cancellation there would leave the
    # process running.
    sink, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, source = anyio.create_memory_object_stream[SessionMessage](0)
    written = anyio.Event()
    reader = _Reader(process.stdout, sink, limit, fail)
    async with anyio.create_task_group() as group:
        group.start_soon(reader.run)
        group.start_soon(_write, process, source, sink, written)
        try:
            yield read_stream, write_stream
        finally:
            reader.closing = True
            with anyio.CancelScope(shield=True):
                read_stream.close()
                write_stream.close()
                with anyio.move_on_after(_FLUSH_SECONDS):
                    await written.wait()
                await _stop_server_process(process)
                for stream in (read_stream, write_stream, sink, source):
                    await stream.aclose()
            group.cancel_scope.cancel()


class StdioServer(ClientTransport):
    """A stdio MCP server for one session of the pack's pool (``expediter_mcp.sessions``):
    started when the session opens, stopped when it closes."""

    def __init__(
        self, command: str, args: Sequence[str], *, max_bytes: int, session: Session
    ) -> None:
        self.command = command
        self.args = tuple(args)
        self.max_bytes = max_bytes
        self._session = session

    def _fail(self, error: expediter.ToolError) -> None:
        if self._session.failure is None:
            self._session.failure = error
            logger.warning("closing a stdio MCP session: %s", error.message)

    @contextlib.asynccontextmanager
    async def connect_session(
        self, *, transport_options: Any = None, **session_kwargs: Any
    ) -> AsyncIterator[CheckedSession]:
        streams = _streams(self.command, self.args, self.max_bytes, self._fail)
        async with (
            streams as (read, write),
            CheckedSession(read, write, **session_kwargs) as session,
        ):
            yield session

    def __repr__(self) -> str:
        return f"<StdioServer {self.command[:80]!r}>"
