"""What a provider adapter is written with: the public surface for packs adding an LLM provider
through the ``register_providers(register)`` hook (see docs/providers.md, "Providers from
packs").

- ``Provider``: the adapter protocol to subclass (name, schemas, strict transform, reading
  calls, the stream accumulator, result messages, name rules).
- ``StreamAccumulator``: what ``Provider.stream()`` returns, fed one chunk or event at a time.
- ``ToolSpec`` (one offered function, as ``Provider.tool`` receives it), ``RawCall`` (a call as
  read from a response), ``Malformed`` (the arguments of a call that cannot run: the toolset
  reports its ``problem`` as the call's error), ``CallResult`` (what ``result_messages`` gets
  for each call), ``NotStrictable`` (raised by ``strict_parameters`` for a schema with no strict
  form).
- ``read_each`` and ``Unreadable``: read each item of a response's call list, so one malformed
  item becomes a call with an error instead of an exception.
- ``result_text`` and ``result_object``: a call's result as the text (or JSON object) a model
  reads, with whether it is an error; ``decode_json``: JSON text to a value, never raising.
- ``usable_message_id``: a response's id when it can key the ledger (what
  ``Provider.message_id`` returns for an id it read).

For apps: ``read_wire(pieces)`` turns the bytes of a stream (an HTTP client's ``iter_bytes()``,
a file saved from the wire: server-sent events, NDJSON or a JSON array of chunks) into its
chunks, as each completes; ``WireReader`` is its push form, ``WireError`` what it raises for
bytes that are not a stream.
"""

from __future__ import annotations

from expediter.core.turns.providers.base import (
    CallResult,
    Malformed,
    Provider,
    RawCall,
    StreamAccumulator,
    ToolSpec,
    Unreadable,
    decode_json,
    read_each,
    result_object,
    result_text,
    usable_message_id,
)
from expediter.core.turns.providers.jsonschema import NotStrictable
from expediter.core.turns.providers.wire import WireError, WireReader, read_wire

__all__ = [
    "CallResult",
    "Malformed",
    "NotStrictable",
    "Provider",
    "RawCall",
    "StreamAccumulator",
    "ToolSpec",
    "Unreadable",
    "WireError",
    "WireReader",
    "decode_json",
    "read_each",
    "read_wire",
    "result_object",
    "result_text",
    "usable_message_id",
]
