"""Stream accumulators for OpenAI's wire formats: Chat Completions chunks (also Mistral's and
every OpenAI-compatible server's) and Responses API events."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from expediter.core.turns.providers.base import RawCall, StreamAccumulator, as_list
from expediter.core.turns.providers.streaming import (
    ReadCalls,
    by_index,
    fields_of,
    joined_arguments,
    mark_unfinished,
    plain,
    sent_arguments,
    skipped,
)

__all__ = ["OpenAIChatStream", "ResponsesStream"]


class _ChatCall:
    """One streamed Chat Completions call: its id, name and argument pieces as they came."""

    __slots__ = ("function", "id", "index", "mixed", "name", "pieces")

    def __init__(self, index: Any) -> None:
        #: The call's index in the response (None when the provider sent none).
        self.index = index
        self.id: Any = None
        self.name: Any = ""
        self.pieces: list[Any] = []
        #: Whether some argument piece was not text (an object, bytes, a wrong kind).
        self.mixed = False
        #: A ``function`` that was not an object, kept for parsing to refuse.
        self.function: Any = None


class OpenAIChatStream(StreamAccumulator):
    """Chat Completions chunks (``choices[0].delta``): ``tool_calls`` fragments by ``index``,
    or by ``id`` when there is no index (Mistral streams whole calls so), content text and
    ``finish_reason``. SDK chunks (openai's ``ChatCompletionChunk``, mistralai's
    ``CompletionChunk`` or ``CompletionEvent``) are read by their attributes.

    A call is complete when a ``finish_reason`` arrived, or when its arguments already are a
    whole JSON object (an object is self-delimiting); otherwise its arguments are an error
    saying the stream ended first.

    Some OpenAI-compatible routers repeat the whole function name in every delta of a call:
    a name piece equal to the name so far is the same name (not ``ff`` from ``f`` + ``f``)
    when the delta repeats the call's id, carries arguments too, or the call's arguments have
    begun. A real name split in pieces (``get_`` + ``weather``) never repeats the id, and all
    of it comes before the arguments.
    """

    def __init__(self, read_calls: ReadCalls) -> None:
        self._read_calls = read_calls
        self._text: list[str] = []
        self._refusal: list[str] = []
        self._calls: list[_ChatCall] = []
        #: The call each index (None: no index) feeds now.
        self._open: dict[Any, _ChatCall] = {}
        self._by_id: dict[str, _ChatCall] = {}
        #: The call the last fragment fed.
        self._last: _ChatCall | None = None
        self._finish: Any = None
        self._head: Mapping[str, Any] | None = None
        self._usage: Any = None

    def feed(self, chunk: Any) -> None:
        """Take one chunk (a parsed JSON object or an SDK chunk); anything else is skipped."""
        # Plain type checks before general ones, nothing copied: this runs once per chunk
        # (benchmarks/README.md: within the provider SDK's own accumulator's time).
        try:
            if type(chunk) is not dict:
                chunk = fields_of(chunk)
                if chunk is None:
                    return
            choices = chunk.get("choices")
            if type(choices) is not list:
                chunk = fields_of(chunk.get("data"))  # mistralai's CompletionEvent wraps one
                if chunk is None:
                    return
                choices = chunk.get("choices")
                if type(choices) is not list:
                    return
            if self._head is None:
                self._head = chunk
            for choice in choices:
                if type(choice) is not dict:
                    choice = fields_of(choice)
                    if choice is None:
                        continue
                number = choice.get("index")
                if number and type(number) is int:
                    continue  # another of n choices: this accumulator follows the first
                delta = choice.get("delta")
                if type(delta) is not dict:
                    delta = fields_of(delta)
                if delta is not None:
                    content = delta.get("content")
                    if content:
                        if type(content) is str:
                            self._text.append(content)
                        else:
                            self._content_parts(content)
                    fragments = delta.get("tool_calls")
                    if fragments:
                        for fragment in as_list(fragments):
                            self._fragment(fragment)
                    refusal = delta.get("refusal")
                    if refusal and type(refusal) is str:
                        self._refusal.append(refusal)
                finish = choice.get("finish_reason")
                if finish is not None:
                    self._finish = finish
            usage = chunk.get("usage")
            if usage is not None:
                self._usage = usage
        except Exception as exc:  # what a model sent never stops the stream
            skipped(chunk, exc)

    def _content_parts(self, content: Any) -> None:
        """Content sent as a list of parts (Mistral's text chunks): their text, in order."""
        for part in as_list(content):
            fields = part if type(part) is dict else fields_of(part)
            if fields is not None and fields.get("type") == "text":
                text = fields.get("text")
                if type(text) is str:
                    self._text.append(text)

    def _fragment(self, fragment: Any) -> None:
        if type(fragment) is not dict:
            fragment = fields_of(fragment)
            if fragment is None:
                return
        index = fragment.get("index")
        key = index if type(index) is int else None
        call = self._open.get(key)
        given = fragment.get("id")
        if given == "null" and call is not None:
            given = None  # mistralai's default for a fragment that carried no id
        if call is None and key is None and given in (None, "", "null") and self._last:
            # Neither index nor id (a server that sends the index only with a call's first
            # piece): the rest of the call fed last, not a new call without a name.
            call, given = self._last, None
        repeated = False
        if given is not None and given != "":
            if call is not None and call.id == given:
                repeated = True
            elif call is None or call.id is not None:
                # A new id where a call is open: a provider streaming whole calls at one
                # index or none (Mistral), or an index-less piece of a call seen before.
                found = self._by_id.get(given) if key is None and type(given) is str else None
                repeated = found is not None
                call = found
                if found is not None:
                    self._open[None] = found
        if call is None:
            call = _ChatCall(key)
            self._calls.append(call)
            self._open[key] = call
        self._last = call
        if given is not None and given != "" and not repeated:
            call.id = given  # not text: kept, and the call refused when read
            if type(given) is str:
                self._by_id.setdefault(given, call)
        function = fragment.get("function")
        if function is None:
            return
        if type(function) is not dict:
            fields = fields_of(function)
            if fields is None:
                call.function = function  # read later into the call's error
                return
            function = fields
        name = function.get("name")
        if name:
            current = call.name
            if type(name) is not str or type(current) is not str:
                if type(current) is str:
                    call.name = name  # not text: kept, and the call refused when read
            elif not current:
                call.name = name
            elif name != current or not (repeated or call.pieces or function.get("arguments")):
                call.name = current + name
        arguments = function.get("arguments")
        if type(arguments) is str:
            if arguments:
                call.pieces.append(arguments)
        elif arguments is not None:
            call.pieces.append(arguments)  # an object (Mistral), bytes, or a wrong kind
            call.mixed = True

    def _items(self) -> list[dict[str, Any]]:
        items = []
        for call in by_index(self._calls):
            function: Any = call.function
            if function is None:
                pieces = call.pieces
                arguments = joined_arguments(pieces, call.mixed) if pieces else ""
                function = {"name": call.name, "arguments": arguments}
            items.append({"id": call.id, "type": "function", "function": function})
        return items

    def text(self) -> str:
        return "".join(self._text)

    def finished(self) -> bool:
        return self._finish is not None

    def _message(self, items: list[dict[str, Any]]) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self._text) or None}
        if self._refusal:
            message["refusal"] = "".join(self._refusal)
        if items:
            message["tool_calls"] = items
        return message

    def response(self) -> dict[str, Any]:
        """The ``chat.completion`` the request would have returned without streaming (a call
        cut short keeps the text that arrived: ``raw_calls`` says it was cut)."""
        head = self._head or {}
        response: dict[str, Any] = {}
        for key in ("id", "created", "model", "system_fingerprint", "service_tier"):
            value = head.get(key)
            if value is not None:
                response[key] = value
        response["object"] = "chat.completion"
        choice = {"index": 0, "message": self._message(self._items())}
        choice["finish_reason"] = self._finish
        response["choices"] = [choice]
        if self._usage is not None:
            response["usage"] = plain(self._usage)
        return response

    def message(self) -> dict[str, Any]:
        """``{"role": "assistant", "content", "tool_calls"}``, each call carrying the id its
        result will answer (made up for a call that came without one), its name text and its
        arguments JSON text (``"{}"`` for arguments that are not: the result says why)."""
        items = self._items()
        for item, raw in zip(items, self.raw_calls(), strict=False):
            item["id"] = raw.call_id
            function = item["function"]
            if type(function) is not dict:
                function = item["function"] = {"name": raw.name, "arguments": "{}"}
            if type(function["name"]) is not str:
                function["name"] = raw.name
            function["arguments"] = sent_arguments(function["arguments"])
        return self._message(items)

    def raw_calls(self) -> list[RawCall]:
        response = self.response()
        raws = self._read_calls(response)
        if self._finish is not None:
            return raws
        items = response["choices"][0]["message"].get("tool_calls", [])
        arguments = [
            item["function"].get("arguments") if type(item["function"]) is dict else None
            for item in items
        ]
        return mark_unfinished(raws, [False] * len(items), arguments)


class _Item:
    """One output item of a Responses stream, as added, its argument pieces, and its end."""

    __slots__ = (
        "arguments",
        "done",
        "ended",
        "index",
        "item",
        "item_id",
        "mixed",
        "pieces",
        "texts",
    )

    def __init__(self, item: Any, done: bool, index: Any) -> None:
        #: The item's ``output_index``.
        self.index = index
        #: The item's ``id``, when it came with one.
        self.item_id: str | None = None
        #: The item as ``output_item.added`` (or ``.done``) carried it.
        self.item = item
        self.done = done
        #: Whether ``function_call_arguments.done`` arrived, and the arguments it carried.
        self.ended = False
        self.arguments: Any = None
        self.pieces: list[Any] = []
        self.mixed = False
        #: ``output_text`` deltas by content index, for a message item not yet done.
        self.texts: dict[Any, list[str]] = {}


#: The events that end a Responses stream (``incomplete``: a limit was reached first).
_ENDS = frozenset({"response.completed", "response.incomplete", "response.failed"})
_STARTS = frozenset({"response.created", "response.in_progress", "response.queued"})


class ResponsesStream(StreamAccumulator):
    """Responses API events: ``response.output_item.added`` / ``.done`` (items by
    ``output_index``), ``response.function_call_arguments.delta`` / ``.done`` (by
    ``item_id``), ``response.output_text.delta``, and ``response.completed`` (or
    ``incomplete`` / ``failed``) at the end. SDK events are read by their attributes.

    A call is complete when its ``output_item.done`` or ``function_call_arguments.done``
    arrived, or when its arguments already are a whole JSON object.

    ``message()`` is ``{"output": [items]}``: the output items to add to the next request's
    ``input`` (as ``response.output`` would be), before the calls' ``function_call_output``
    items.
    """

    def __init__(self, read_calls: ReadCalls) -> None:
        self._read_calls = read_calls
        self._items: list[_Item] = []
        self._by_index: dict[int, _Item] = {}
        self._by_id: dict[str, _Item] = {}
        self._text: list[str] = []
        self._response: Any = None
        self._finished = False

    def feed(self, event: Any) -> None:
        """Take one event (a parsed JSON object or an SDK event); anything else is skipped."""
        # Argument and text deltas first, plain type checks: the per-chunk budget
        # (benchmarks/README.md).
        try:
            if type(event) is not dict:
                event = fields_of(event)
                if event is None:
                    return
            kind = event.get("type")
            if kind == "response.function_call_arguments.delta":
                entry = self._find(event)
                if entry is not None:
                    delta = event.get("delta")
                    if type(delta) is str:
                        if delta:
                            entry.pieces.append(delta)
                    elif delta is not None:
                        entry.pieces.append(delta)
                        entry.mixed = True
            elif kind == "response.output_text.delta":
                delta = event.get("delta")
                if delta and type(delta) is str:
                    self._text.append(delta)
                    entry = self._find(event)
                    if entry is not None and not entry.done:
                        part = event.get("content_index")
                        entry.texts.setdefault(part if type(part) is int else 0, []).append(delta)
            elif kind == "response.output_item.added":
                self._add(event, done=False)
            elif kind == "response.output_item.done":
                self._add(event, done=True)
            elif kind == "response.function_call_arguments.done":
                entry = self._find(event)
                if entry is not None:
                    entry.ended = True
                    entry.arguments = event.get("arguments")
            elif kind in _STARTS:
                self._response = event.get("response")
            elif kind in _ENDS:
                self._response = event.get("response")
                self._finished = True
        except Exception as exc:  # what a model sent never stops the stream
            skipped(event, exc)

    def _find(self, event: Mapping[str, Any]) -> _Item | None:
        item_id = event.get("item_id")
        if type(item_id) is str:
            entry = self._by_id.get(item_id)
            if entry is not None:
                return entry
        index = event.get("output_index")
        entry = self._by_index.get(index) if type(index) is int else None
        if entry is not None and type(item_id) is str and entry.item_id is not None:
            return None  # another item's id: its pieces are not this item's
        return entry

    def _add(self, event: Mapping[str, Any], done: bool) -> None:
        item = event.get("item")
        fields = item if type(item) is dict else fields_of(item)
        if fields is None:
            return
        item_id = fields.get("id")
        index = event.get("output_index")
        entry = None
        if done:
            if type(item_id) is str:
                entry = self._by_id.get(item_id)
            if entry is None and type(index) is int:
                entry = self._by_index.get(index)
        if entry is None or entry.done:
            entry = _Item(item, done, index)
            self._items.append(entry)
        else:
            entry.item, entry.done = item, True
        if type(index) is int:
            self._by_index[index] = entry
        if type(item_id) is str:
            self._by_id[item_id] = entry
            entry.item_id = item_id

    def _output(self) -> tuple[list[Any], list[_Item]]:
        """The output items, rebuilt, and the entry of each (empty when they came whole in the
        final event alone)."""
        if not self._items:
            final = plain(self._response) if self._response is not None else None
            output = as_list(final.get("output")) if isinstance(final, Mapping) else []
            return list(output), []
        output = []
        entries = by_index(self._items)
        for entry in entries:
            item = plain(entry.item)
            if not entry.done and isinstance(item, Mapping):
                item = dict(item)
                kind = item.get("type")
                if kind == "function_call":
                    if entry.ended and entry.arguments is not None:
                        item["arguments"] = entry.arguments
                    elif entry.pieces:
                        item["arguments"] = joined_arguments(entry.pieces, entry.mixed)
                    elif item.get("arguments") is None:
                        item["arguments"] = ""
                elif kind == "message" and entry.texts:
                    item["content"] = [
                        {"type": "output_text", "text": "".join(texts), "annotations": []}
                        for _, texts in sorted(entry.texts.items())
                    ]
            output.append(item)
        return output, entries

    def text(self) -> str:
        return "".join(self._text)

    def finished(self) -> bool:
        return self._finished

    def _rebuilt(self) -> tuple[dict[str, Any], list[_Item]]:
        output, entries = self._output()
        final = plain(self._response) if self._response is not None else None
        response: dict[str, Any] = {"object": "response"}
        if isinstance(final, Mapping):
            response.update((key, value) for key, value in final.items() if key != "output")
        response["output"] = output
        return response, entries

    def response(self) -> dict[str, Any]:
        """The ``response`` object the request would have returned without streaming (an
        item cut short keeps what arrived: ``raw_calls`` says it was cut)."""
        return self._rebuilt()[0]

    def message(self) -> dict[str, Any]:
        output = [dict(item) if isinstance(item, Mapping) else item for item in self._output()[0]]
        calls = [
            item for item in output if type(item) is dict and item.get("type") == "function_call"
        ]
        for item, raw in zip(calls, self.raw_calls(), strict=False):
            item["call_id"] = raw.call_id
            item["arguments"] = sent_arguments(item.get("arguments"))
        return {"output": output}

    def raw_calls(self) -> list[RawCall]:
        response, entries = self._rebuilt()
        raws = self._read_calls(response)
        if not entries:  # the items came whole, in the final event
            return raws
        complete, arguments = [], []
        for entry, item in zip(entries, response["output"], strict=True):
            if isinstance(item, Mapping) and item.get("type") == "function_call":
                complete.append(entry.done or entry.ended)
                arguments.append(item.get("arguments"))
        return mark_unfinished(raws, complete, arguments)
