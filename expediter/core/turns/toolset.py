"""A toolset: the tool instances offered in one turn, their names, schemas, calls and results."""

from __future__ import annotations

import copy
import logging
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from expediter.core.records.calls import CallEvent, ToolCall
from expediter.core.records.digests import config_key
from expediter.core.records.redaction import config_secrets, hide_values, log_hidden
from expediter.core.records.text import echo
from expediter.core.turns.callstream import CallStream
from expediter.core.turns.naming import NameMap, assign_names
from expediter.core.turns.providers import get_provider, name_rule
from expediter.core.turns.providers.base import (
    CallResult,
    Provider,
    RawCall,
    ToolSpec,
    json_kind,
    parse_arguments,
    usable_message_id,
)
from expediter.core.turns.providers.jsonschema import (
    NotStrictable,
    model_schema,
    read_only,
    strip_optional_nulls,
)
from expediter.core.turns.providers.streaming import sdk_response
from expediter.errors import ArgumentError, EgressBlocked, UnknownProvider
from expediter.hookspecs.tool import Action, CallContext

if TYPE_CHECKING:
    from expediter.core.discovery.catalogue import ToolInfo
    from expediter.core.discovery.loading import LoadedTool

__all__ = ["CLIENT_TOOL", "OfferedAction", "Offers", "Runner", "ToolInstance", "Toolset"]

logger = logging.getLogger(__name__)

#: The tool name recorded for client-side tools (functions the application runs itself).
CLIENT_TOOL = "client"
#: How many offered names an "unknown function" error lists before "and N more".
NAMES_LISTED = 30
#: The same unknown name this many times in a turn earns a directive to stop.
REPEATS_BEFORE_DIRECTIVE = 3


class Runner(Protocol):
    """Runs a turn's calls (the host's executor): one event per call, in call order."""

    def run(
        self,
        turn: Toolset,
        calls: Iterable[ToolCall],
        message_id: str | None,
        run_id: str | None,
    ) -> Iterator[CallEvent]: ...

    def arun(
        self,
        turn: Toolset,
        calls: Iterable[ToolCall],
        message_id: str | None,
        run_id: str | None,
    ) -> AsyncIterator[CallEvent]: ...


def _optional_mapping(value: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    return None if value is None else dict(value)


def _snapshot(config: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """A deep copy of a configuration (the configuration itself when it holds something that
    cannot be copied: then it is digested as it is at each load)."""
    if config is None:
        return None
    try:
        return copy.deepcopy(dict(config))
    except Exception:
        logger.debug("a tool instance's configuration cannot be copied", exc_info=True)
        return config


def _overrides(value: Mapping[str, Mapping[str, Any]] | None) -> Mapping[str, Any]:
    return {str(name): dict(item) for name, item in (value or {}).items()}


@attrs.frozen
class ToolInstance:
    """A configured instance of a tool to offer, e.g. two GitHub accounts of one user."""

    tool: str
    #: Unique within the toolset (default: the tool's name).
    instance_id: str | None = None
    #: What the model sees when names must be told apart (default: the instance id).
    name: str | None = None
    #: The configuration the tool gets (secret fields included: never recorded).
    config: Mapping[str, Any] | None = attrs.field(
        default=None, converter=_optional_mapping, repr=False
    )
    #: The user whose configuration and credentials these are (None: the invoker's, or for a
    #: stored instance, shared by the operator). A call by another user is a delegation.
    owner_id: str | None = None
    #: Per-action overrides: ``{action: {"active": bool, "require_approval": bool,
    #: "fixed": {...}}}``.
    actions: Mapping[str, Mapping[str, Any]] = attrs.field(factory=dict, converter=_overrides)
    #: Stored with ``host.instances`` (a paused call reloads it by id; nothing of its
    #: configuration is recorded with the call).
    stored: bool = False
    #: The stored instance's revision (changes with its configuration).
    revision: int | None = None
    #: ``config`` as it was when this instance was made (a deep copy): what its tool is
    #: loaded with, so changing ``config`` afterwards changes nothing that runs.
    snapshot: Mapping[str, Any] | None = attrs.field(init=False, eq=False, repr=False)
    #: A digest of ``snapshot``: the key its loaded tool is found by, taken once rather than
    #: on every call (a large configuration, such as an imported API's actions, would
    #: otherwise be hashed per call).
    config_digest: str = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        snapshot = _snapshot(self.config)
        object.__setattr__(self, "snapshot", snapshot)
        object.__setattr__(self, "config_digest", config_key(snapshot))

    @classmethod
    def coerce(cls, value: ToolInstance | Mapping[str, Any]) -> ToolInstance:
        """Accept a ToolInstance or a mapping with the same keys."""
        if isinstance(value, ToolInstance):
            return value
        return cls(
            tool=value["tool"],
            instance_id=value.get("instance_id"),
            name=value.get("name"),
            config=value.get("config"),
            owner_id=value.get("owner_id"),
            actions=value.get("actions"),
        )

    def delegated_from(self, user_id: str | None) -> str | None:
        """The owner, when a call by ``user_id`` uses another user's instance."""
        owner = self.owner_id
        return owner if owner is not None and owner != user_id else None

    def apply(self, action: Action) -> Action:
        """The action as this instance offers it (its per-action overrides applied)."""
        override = self.actions.get(action.name)
        if not override:
            return action
        changes: dict[str, Any] = {}
        if "active" in override:
            changes["active"] = bool(override["active"])
        if "require_approval" in override:
            changes["require_approval"] = bool(override["require_approval"])
        if override.get("fixed"):
            changes["fixed"] = {**action.fixed, **override["fixed"]}
        return attrs.evolve(action, **changes)


@attrs.frozen
class OfferedAction:
    """One action offered in a turn, under the name the model will use."""

    name: str
    instance_id: str
    tool: str
    display_name: str
    action: Action
    client: bool = False
    #: A default tool's action: a call may still name the instance by the tool's name.
    default: bool = False


@attrs.frozen
class _Source:
    instance_id: str
    display_name: str
    tool: str
    actions: tuple[Action, ...]
    client: bool = False
    default: bool = False


def _client_action(definition: Mapping[str, Any]) -> Action:
    function = definition.get("function", definition)
    if not isinstance(function, Mapping) or not function.get("name"):
        raise ArgumentError(f"a client tool needs a function name, got {definition!r}")
    return Action(
        name=str(function["name"]),
        description=str(function.get("description") or ""),
        parameters=dict(function.get("parameters") or {"type": "object", "properties": {}}),
    )


@attrs.frozen
class _Unrunnable:
    """The result of a call that could not run as proposed (unknown name, bad arguments)."""

    call_id: str
    error: str
    status: str = "error"
    result: Any = None


@attrs.define(eq=False)
class _Composition:
    """What a set of sources offers, kept while the same sources are offered again."""

    sources: tuple[_Source, ...]
    name_map: NameMap
    actions: tuple[OfferedAction, ...]
    by_name: dict[str, OfferedAction]
    #: ``(provider, strict)`` -> one ToolSpec per action.
    specs: dict[tuple[str, bool], list[ToolSpec]] = attrs.Factory(dict)


class Toolset:
    """The tools offered in one turn: schemas per provider, parsing calls, result messages."""

    #: A toolset's calls are a host application's, made for its user: never the operator's
    #: (whose direct calls count an approval prompt as given).
    operator = False
    #: Calls are resolved by the names this turn offered.
    by_name = True

    def __init__(
        self,
        offers: Offers,
        sources: Sequence[_Source],
        *,
        user_id: str | None = None,
        headless: bool = False,
        allowlist: Iterable[str] = (),
        errors: Sequence[str] = (),
        bindings: Mapping[str, ToolInstance] | None = None,
    ) -> None:
        self._offers = offers
        #: The configured instances offered, by instance id (configuration, owner).
        self.bindings: dict[str, ToolInstance] = dict(bindings or {})
        self.user_id = user_id
        self.headless = headless
        self.allowlist = frozenset(allowlist)
        #: Instances that could not be offered (their tool failed to describe itself).
        self.errors = list(errors)
        #: How often each unknown function name was called in this turn.
        self._unresolved: dict[str, int] = {}
        self._composition = offers.compose(sources)
        self.name_map: NameMap = self._composition.name_map
        #: The offered actions, in offer order.
        self.actions: tuple[OfferedAction, ...] = self._composition.actions
        self._by_name = self._composition.by_name

    def __len__(self) -> int:
        return len(self.actions)

    def offered(self, name: str) -> OfferedAction | None:
        """The action offered under a name, or None."""
        return self._by_name.get(name)

    # -- schemas ------------------------------------------------------------------------------

    def schemas(self, provider: str, strict: bool = False) -> list[dict[str, Any]]:
        """The list the provider's ``tools`` field takes (strict mode for OpenAI/Anthropic).

        A function whose name the provider does not accept (its ``max_name_length`` and
        ``name_pattern``) is left out of that provider's list, with a logged warning."""
        adapter = self._offers.provider(provider)
        specs = self._composition.specs.get((adapter.name, strict))
        if specs is None:
            fits = name_rule(adapter)
            specs = [
                self._offers.spec(adapter, offered, strict)
                for offered in self.actions
                if fits is None or _fits(fits, offered.name, adapter)
            ]
            self._composition.specs[(adapter.name, strict)] = specs
        try:
            return adapter.tools(specs)
        except Exception as exc:  # the built-in adapters never raise here; a pack's might
            raise _adapter_failed(adapter, "building the tool list", exc) from exc

    # -- running ------------------------------------------------------------------------------

    def run(
        self,
        calls: Iterable[ToolCall],
        message_id: str | None = None,
        run_id: str | None = None,
    ) -> Iterator[CallEvent]:
        """Run a turn's calls: yields one event per call, in call order (``completed``,
        ``error``, ``denied``, ``awaiting_approval``, ``requires_client_execution``).
        Never raises for what a tool or the model did."""
        return self._offers.runner.run(self, calls, message_id, run_id)

    def arun(
        self,
        calls: Iterable[ToolCall],
        message_id: str | None = None,
        run_id: str | None = None,
    ) -> AsyncIterator[CallEvent]:
        """Async ``run``: independent calls run concurrently, each within the host's
        ``call_timeout``; final events come in call order."""
        return self._offers.runner.arun(self, calls, message_id, run_id)

    def unknown_name(self, call: ToolCall) -> str:
        """The error for a call to a name that was not offered: what is offered, and after a
        few attempts at the same name in this turn, a directive to stop."""
        names = self.name_map.names
        listed = ", ".join(names[:NAMES_LISTED]) or "none"
        if len(names) > NAMES_LISTED:
            listed += f", and {len(names) - NAMES_LISTED} more"
        if not call.name and call.error:
            return f"{call.error}. Available: {listed}"  # malformed: there was no name to try
        counts = self._unresolved
        counts[call.name] = attempts = counts.get(call.name, 0) + 1
        name = echo(call.name)
        if attempts >= REPEATS_BEFORE_DIRECTIVE:
            return (
                f"there is no function {name}, and this is attempt "
                f"{attempts}. Stop calling {name}; use one of: {listed}"
            )
        message = f"unknown function {name}: it was not offered. Available: {listed}"
        if call.error and "unknown function name" not in call.error:
            message += f" ({call.error})"
        return message

    # -- calls ----------------------------------------------------------------------------------

    def _call(self, raw: RawCall) -> ToolCall:
        offered = self._by_name.get(raw.name)
        arguments, problem = parse_arguments(raw.arguments)
        if offered is None:
            if not raw.name and problem:
                error = f"the call could not be read: {problem}"
            else:
                error = f"unknown function name {echo(raw.name)}: no such function was offered"
                if problem:
                    error += f"; also, {problem}"
            return ToolCall(raw.call_id, raw.name, arguments, error=error, extras=raw.extras)
        if problem is None:
            arguments = strip_optional_nulls(arguments, offered.action.parameters)
        return ToolCall(
            raw.call_id,
            raw.name,
            arguments,
            instance_id=offered.instance_id,
            tool=offered.tool,
            action=offered.action.name,
            error=None if problem is None else f"{raw.name}: {problem}",
            extras=raw.extras,
        )

    def parse_calls(self, provider: str, response: Mapping[str, Any]) -> list[ToolCall]:
        """The tool calls in a provider response: its parsed JSON, or the SDK's response
        object itself (``ChatCompletion``, ``Message``, ``GenerateContentResponse`` ...).

        Whatever the model wrote, each call is a ``ToolCall`` (with ``error`` set when it
        cannot run as written); only a response that is neither a JSON object nor an SDK
        object raises (``ArgumentError``)."""
        adapter = self._offers.provider(provider)
        if type(response) is not dict and not isinstance(response, Mapping):
            response = _response_object(adapter.name, response)
        try:
            raws = adapter.read_calls(response)
        except Exception as exc:  # the built-in adapters never raise here; a pack's might
            raise _adapter_failed(adapter, "reading the response", exc) from exc
        return [self._call(raw) for raw in raws]

    def message_id(self, provider: str, response: Mapping[str, Any]) -> str | None:
        """The id the provider gave a whole response (or a stream's ``response()``), to pass
        as ``run(calls, message_id=...)``; None when it has none that can key the ledger."""
        adapter = self._offers.provider(provider)
        if type(response) is not dict and not isinstance(response, Mapping):
            response = _response_object(adapter.name, response)
        try:
            found = adapter.message_id(response)
        except Exception as exc:  # the built-in adapters never raise here; a pack's might
            raise _adapter_failed(adapter, "reading the response's id", exc) from exc
        return usable_message_id(found)

    def stream(self, provider: str) -> CallStream:
        """A new accumulator for one streamed response: ``feed(chunk)`` each chunk or event
        as the provider's SDK yields it (or its parsed JSON), then ``calls()``, ``text()``
        and ``message()``. Every provider streams (``UnknownProvider`` for an adapter that
        does not)."""
        adapter = self._offers.provider(provider)
        try:
            return CallStream(adapter.stream(), self._call, adapter.name)
        except UnknownProvider:
            raise
        except Exception as exc:  # a pack's adapter that raises, or returns no accumulator
            raise _adapter_failed(adapter, "making a stream accumulator", exc) from exc

    def parse_stream(self, provider: str, chunks: Iterable[Any]) -> list[ToolCall]:
        """The calls of a whole streamed response: ``stream(provider).feed_all(chunks)
        .calls()`` (a chunk of the wrong shape is skipped; ``ArgumentError`` when ``chunks``
        is not a sequence of chunks)."""
        return self.stream(provider).feed_all(chunks).calls()

    def result_messages(
        self,
        provider: str,
        calls: Sequence[ToolCall],
        events: Iterable[CallResult],
    ) -> list[dict[str, Any]]:
        """The messages that give the model every call's result (missing ones as errors).

        Events go to calls by call id, in order: when the model used one id for two calls,
        the first event of that id answers the first call, the second the second."""
        by_id: dict[str, list[CallResult]] = {}
        for event in events:
            by_id.setdefault(event.call_id, []).append(event)
        results: list[CallResult | None] = []
        for call in calls:
            queue = by_id.get(call.call_id)
            result = queue.pop(0) if queue else None
            if result is None and call.error is not None:
                result = _Unrunnable(call.call_id, call.error)
            results.append(result)
        adapter = self._offers.provider(provider)
        try:
            return adapter.result_messages(calls, results)
        except Exception as exc:  # the built-in adapters never raise here; a pack's might
            raise _adapter_failed(adapter, "building the result messages", exc) from exc


def _response_object(provider: str, response: Any) -> dict[str, Any]:
    """An SDK's response object as its JSON; ``ArgumentError`` for anything else."""
    try:
        dumped = sdk_response(response)
    except ValueError as exc:
        raise ArgumentError(f"the {provider} response cannot be read: {exc}") from exc
    if dumped is None:
        raise ArgumentError(
            f"the {provider} response must be a JSON object or the SDK's response object, "
            f"not {json_kind(response)}"
        )
    return dumped


def _problem_text(exc: Exception) -> str:
    """Why an instance cannot be offered, for the operator (an egress refusal with its reason
    and what allows it: never the model's text)."""
    if isinstance(exc, EgressBlocked):
        return f"EgressBlocked: {exc.detail}"
    return f"{type(exc).__name__}: {exc}"


def _adapter_failed(adapter: Provider, doing: str, exc: Exception) -> ArgumentError:
    """The error for an adapter that raised: it names the adapter's class, so a pack's bug
    is reported to the pack (the exception's text is left out: it may quote the model)."""
    kind = type(adapter)
    return ArgumentError(
        f"the {adapter.name} adapter failed {doing} ({type(exc).__name__}): report it to "
        f"the adapter's authors ({kind.__module__}.{kind.__qualname__})"
    )


def _fits(fits: Callable[[str], bool], name: str, adapter: Provider) -> bool:
    """Whether the provider accepts a function name (a warning when it does not)."""
    if fits(name):
        return True
    logger.warning(
        "function %s is not offered to %s: the provider takes names of at most %d "
        "characters matching %s",
        echo(name),
        adapter.name,
        adapter.max_name_length,
        adapter.name_pattern,
        extra={"provider": adapter.name},
    )
    return False


class Offers:
    """What a host offers, composed into toolsets; holds the caches all its toolsets share.

    The host hands in how to read its catalogue, load a tool instance, and run calls; a toolset
    never sees the host.
    """

    def __init__(
        self,
        *,
        catalogue: Callable[[], Sequence[ToolInfo]],
        tool_info: Callable[[str], ToolInfo],
        load: Callable[..., LoadedTool],
        runner: Runner,
        listing_context: Callable[[LoadedTool, str | None, str | None, bool], CallContext],
        provider: Callable[[str], Provider] = get_provider,
    ) -> None:
        self._catalogue = catalogue
        self._tool_info = tool_info
        self._load = load
        self.runner = runner
        #: The adapter for a provider name: the host's lookup knows the packs' providers too
        #: (default: the built-ins only); ``UnknownProvider`` for a name nobody registered.
        self.provider = provider
        #: The context a configured instance lists its actions with: ``(loaded tool,
        #: invoker, owner, stored)`` -> a context with the instance's secrets, the operator's
        #: egress ranges and, for a stored instance, its OAuth tokens (a remote tool needs
        #: them to ask its server).
        self._listing_context = listing_context
        #: Provider schemas per action version: ``(id(action), provider, strict)`` -> schema.
        self._schemas: dict[tuple[int, str, bool], tuple[Action, dict[str, Any], bool]] = {}
        #: Compositions by the identity of their sources (see ``compose``).
        self._compositions: dict[tuple[int, ...], _Composition] = {}
        self._installed: tuple[_Source, ...] | None = None
        #: Default tools' sources by the defaults offered.
        self._defaults: dict[tuple[tuple[str, str], ...], tuple[_Source, ...]] = {}
        #: Stored instances' sources by ``(id(resolved instance), user)``.
        #: A dynamic tool's entry also holds the actions its source was made from.
        #: The instances that could not be offered and why, logged once each.
        self._reported: set[tuple[str, str]] = set()
        self._stored: dict[
            tuple[int, str | None], tuple[ToolInstance, _Source, dict[str, Action] | None]
        ] = {}

    def compose(self, sources: Sequence[_Source]) -> _Composition:
        """Name the sources' actions, reusing the result when the very same sources come again."""
        cache = self._compositions
        key = tuple(id(source) for source in sources)
        cached = cache.get(key)
        if cached is not None and all(a is b for a, b in zip(cached.sources, sources, strict=True)):
            return cached
        name_map = assign_names(
            (source.instance_id, source.display_name, source.tool, action.name, source.client)
            for source in sources
            for action in source.actions
        )
        offered = []
        for source in sources:
            for action in source.actions:
                name = name_map.name_for(source.instance_id, action.name)
                assert name is not None
                offered.append(
                    OfferedAction(
                        name,
                        source.instance_id,
                        source.tool,
                        source.display_name,
                        action,
                        source.client,
                        source.default,
                    )
                )
        composition = _Composition(
            tuple(sources), name_map, tuple(offered), {item.name: item for item in offered}
        )
        if len(cache) >= 64:
            cache.clear()
        cache[key] = composition
        return composition

    def spec(self, adapter: Provider, offered: OfferedAction, strict: bool) -> ToolSpec:
        """One action's provider schema (per action version, shared by every composition)."""
        key = (id(offered.action), adapter.name, strict)
        cached = self._schemas.get(key)
        if cached is None or cached[0] is not offered.action:
            parameters = model_schema(offered.action)
            is_strict = False
            if strict and adapter.supports_strict:
                try:
                    parameters, is_strict = adapter.strict_parameters(parameters), True
                except NotStrictable as exc:
                    logger.info("%s is offered without strict mode: %s", offered.name, exc)
                except Exception as exc:  # a malformed schema (e.g. from a remote server)
                    logger.warning(
                        "%s is offered without strict mode: its schema is malformed (%s)",
                        offered.name,
                        type(exc).__name__,
                    )
            try:
                adapted = adapter.parameters(parameters)
            except Exception as exc:  # the built-in adapters never raise here; a pack's might
                raise _adapter_failed(adapter, f"adapting {offered.name}'s schema", exc) from exc
            cached = (offered.action, read_only(adapted), is_strict)
            if len(self._schemas) >= 8192:
                self._schemas.clear()  # dynamic actions replace theirs: keep no dead ones
            self._schemas[key] = cached
        _, parameters, is_strict = cached
        return ToolSpec(offered.name, offered.action.description, parameters, is_strict)

    def _installed_sources(self) -> list[_Source]:
        """One source per offered non-internal tool (the same objects while the host lives)."""
        if self._installed is None:
            self._installed = tuple(
                _Source(info.name, info.name, info.name, tuple(a for a in info.actions if a.active))
                for info in self._catalogue()
            )
        return list(self._installed)

    def _default_sources(self, defaults: tuple[tuple[str, str], ...]) -> tuple[_Source, ...]:
        """One source per default tool, under its stable instance id (the same objects while
        the same defaults are offered)."""
        cached = self._defaults.get(defaults)
        if cached is None:
            cached = tuple(
                _Source(
                    instance_id,
                    tool,
                    tool,
                    tuple(a for a in self._tool_info(tool).actions if a.active),
                    default=True,
                )
                for instance_id, tool in defaults
            )
            if len(self._defaults) >= 64:
                self._defaults.clear()
            self._defaults[defaults] = cached
        return cached

    def _instance_source(self, instance: ToolInstance, user_id: str | None) -> _Source:
        """The source of a configured instance: its tool loaded with its configuration, its
        actions as the instance offers them. A stored instance's is kept while the same
        resolved instance (same revision) comes again for the same user."""
        key = (id(instance), user_id)
        cached = None
        if instance.stored:
            cached = self._stored.get(key)
            if cached is not None and cached[0] is instance and cached[2] is None:
                return cached[1]
        instance_id = instance.instance_id or instance.tool
        loaded = self._load(
            instance.tool,
            user_id,
            instance_id=instance_id,
            config=instance.snapshot,
            owner_id=instance.owner_id,
            digest=instance.config_digest if instance.snapshot is not instance.config else None,
        )
        context = self._listing_context(loaded, user_id, instance.owner_id, instance.stored)
        listed = loaded.actions(context)
        if cached is not None and cached[0] is instance and cached[2] is listed:
            return cached[1]  # a dynamic tool whose actions did not change
        actions = tuple(
            offered for offered in (instance.apply(a) for a in listed.values()) if offered.active
        )
        source = _Source(instance_id, instance.name or instance_id, instance.tool, actions)
        if instance.stored:
            if len(self._stored) >= 4096:
                self._stored.clear()
            # A dynamic tool's source is kept with the actions it was made from, and reused
            # only while the tool returns the same ones.
            self._stored[key] = (instance, source, listed if loaded.dynamic else None)
        return source

    def _instance_secrets(self, instance: ToolInstance) -> frozenset[str]:
        """The secret texts of an instance's configuration: the fields its tool declares
        secret and the secret-looking ones (what its loaded tool would hide)."""
        fields: tuple[Any, ...] = ()
        if instance.snapshot:
            try:
                fields = self._tool_info(instance.tool).config
            except Exception as exc:  # a tool that is gone: its secret-looking fields only
                logger.debug("the configuration fields of %s are unknown: %s", instance.tool, exc)
        return config_secrets(instance.snapshot, fields)

    def _not_offered(
        self, instance_id: str, problem: str, exc: Exception, secrets: frozenset[str]
    ) -> None:
        """Log an instance that cannot be offered, once per instance and problem (every
        turn's toolset meets it again); the traceback goes with it (the command line shows it
        at ``-v``), the instance's secrets hidden from both."""
        key = (instance_id, problem)
        if key in self._reported:
            return
        if len(self._reported) >= 4096:
            self._reported.clear()
        self._reported.add(key)
        log_hidden(
            logger,
            logging.WARNING,
            "tool instance %s cannot be offered: %s",
            instance_id,
            problem,
            secrets=secrets,
            exc=exc,
        )

    def toolset(
        self,
        *,
        user_id: str | None = None,
        instances: Iterable[ToolInstance | Mapping[str, Any]] | None = None,
        client_tools: Iterable[Mapping[str, Any]] = (),
        internal: Iterable[str] = (),
        headless: bool = False,
        allowlist: Iterable[str] = (),
        stored: Sequence[ToolInstance] = (),
        defaults: tuple[tuple[str, str], ...] | None = None,
        errors: Sequence[str] = (),
    ) -> Toolset:
        """Assemble a toolset: the user's stored instances, the default tools (``defaults``;
        None: every installed tool under its own name), explicit instances, internal and
        client tools. A default whose name a stored instance takes is left out; in a headless
        turn, tools declared ``headless_excluded`` are."""
        found_errors = list(errors)
        bindings: dict[str, ToolInstance] = {}
        sources: dict[str, _Source] = {}
        for position, value in enumerate((*stored, *(instances or ()))):
            instance = ToolInstance.coerce(value)
            instance_id = instance.instance_id or instance.tool
            if position >= len(stored):
                # An instance the app names: ToolNotFound / ToolConflict for a bad tool name.
                # A stored one whose pack broke is one error among the toolset's.
                self._tool_info(instance.tool)
            try:
                source = self._instance_source(instance, user_id)
            except Exception as exc:
                # A tool that cannot be made from its configuration, or list its actions, may
                # say why by quoting the configuration: its secrets are hidden from the error.
                secrets = self._instance_secrets(instance)
                problem = hide_values(_problem_text(exc), secrets)
                found_errors.append(f"instance {instance_id!r}: {problem}")
                self._not_offered(instance_id, problem, exc, secrets)
                continue
            sources.pop(instance_id, None)
            sources[instance_id] = source
            bindings[instance_id] = instance
        taken = {source.display_name for source in sources.values()}
        base = self._installed_sources() if defaults is None else self._default_sources(defaults)
        offered: dict[str, _Source] = {
            source.instance_id: source
            for source in base
            if source.display_name not in taken and source.instance_id not in sources
        }
        offered.update(sources)
        for info in (self._tool_info(name) for name in internal):
            actions = tuple(action for action in info.actions if action.active)
            offered[info.name] = _Source(info.name, info.name, info.name, actions)
        if headless:
            offered = {
                key: source
                for key, source in offered.items()
                if not self._tool_info(source.tool).headless_excluded
            }
        for definition in client_tools:
            action = _client_action(definition)
            instance_id = f"{CLIENT_TOOL}:{action.name}"
            offered[instance_id] = _Source(instance_id, CLIENT_TOOL, CLIENT_TOOL, (action,), True)
        return Toolset(
            self,
            list(offered.values()),
            user_id=user_id,
            headless=headless,
            allowlist=allowlist,
            errors=found_errors,
            bindings=bindings,
        )
