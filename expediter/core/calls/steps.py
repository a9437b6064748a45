"""The records a call travels in through the pipeline: its turn and its step."""

from __future__ import annotations

import base64
import logging
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol, final

from expediter.core.authoring.conversion import NotJSON, to_json_value
from expediter.core.records.redaction import hide_values, redact, secrets_under
from expediter.core.records.text import echo

if TYPE_CHECKING:
    from expediter.core.discovery.loading import LoadedTool
    from expediter.core.ledger import Attempt
    from expediter.core.records.calls import CallEvent, ToolCall
    from expediter.core.turns.toolset import OfferedAction, ToolInstance
    from expediter.hookspecs.tool import Action, CallContext

__all__ = [
    "BareTurn",
    "Step",
    "Turn",
    "Withheld",
    "call_secrets",
    "delegated_from",
    "hide_secrets",
    "owner_of",
    "recorded_arguments",
    "resume_request",
    "secret_names",
]

logger = logging.getLogger(__name__)


class Turn(Protocol):
    """For whom a batch of calls runs, and how. A ``Toolset`` is one (a model's turn); a
    ``BareTurn`` stands for calls made without one (the operator's, and resumed calls)."""

    @property
    def user_id(self) -> str | None:
        """The user the calls are made for (the invoker)."""

    @property
    def headless(self) -> bool:
        """No human can be asked: calls needing approval run only when allowlisted."""

    @property
    def allowlist(self) -> frozenset[str]:
        """Instance ids or tool names that may run unasked in a headless turn."""

    @property
    def bindings(self) -> Mapping[str, ToolInstance]:
        """The configured instances of the turn by instance id: their configuration (secrets
        included) and owner."""

    @property
    def by_name(self) -> bool:
        """Calls are resolved by the name they were offered under (a model's turn): one whose
        name is not offered, or names another tool or action, is refused."""

    @property
    def operator(self) -> bool:
        """The operator's own calls (``Host.call``): an approval prompt counts as given, a
        forced prompt or a denial still refuses the call."""

    def offered(self, name: str) -> OfferedAction | None:
        """The action offered under a name in this turn, or None."""
        ...

    def unknown_name(self, call: ToolCall) -> str:
        """The error for a call whose name does not resolve."""
        ...


@final
class BareTurn:
    """Calls made without a toolset: nothing is offered by name, the call names its tool."""

    __slots__ = ("allowlist", "bindings", "headless", "operator", "user_id")

    #: The call names its tool and action itself.
    by_name = False

    def __init__(
        self, user_id: str | None = None, *, headless: bool = False, operator: bool = False
    ) -> None:
        self.user_id = user_id
        self.headless = headless
        self.operator = operator
        self.allowlist: frozenset[str] = frozenset()
        self.bindings: dict[str, ToolInstance] = {}

    def offered(self, name: str) -> OfferedAction | None:
        """Nothing is offered by name."""
        return None

    def unknown_name(self, call: ToolCall) -> str:
        """What a call without a tool and action lacks."""
        return call.error or f"unknown function {echo(call.name)}"


@final
class Step:
    """One call on its way through the pipeline.

    A plain class whose defaults live on the class, so making one (once per call) sets only
    what every call has: the per-call turn budget (benchmarks/README.md).
    """

    #: Set when the call ended (or paused) before running: the event to yield.
    final: CallEvent | None = None
    loaded: LoadedTool | None = None
    #: Built on first use (``Executor.context``).
    context: CallContext | None = None
    #: ``time.time()`` by which the call should finish, or None.
    deadline: float | None = None
    #: The action as the tool describes it.
    spec: Action | None = None
    #: The arguments the tool runs with (fixed values applied).
    run_arguments: Mapping[str, Any] | None = None
    attempt: Attempt | None = None
    redacted: Mapping[str, Any] | None = None
    #: ``time.perf_counter()`` when the tool started (None until it runs).
    started: float | None = None
    #: ``time.perf_counter()`` when the tool returned or raised (None while it runs).
    ended: float | None = None
    #: The ledger decision recorded when the call is proposed (e.g. ``operator``).
    decision: str | None = None
    reason: str | None = None
    #: The tool started running (set where it runs; a call cancelled before never starts).
    running: bool = False
    #: Reported failed (timed out, cancelled) while its tool may still run.
    unsettled: bool = False
    #: The failure of an unsettled call is recorded: a late result can follow it.
    settled: bool = False
    #: A late result (value, exception) that came before the failure was recorded.
    late: tuple[Any, BaseException | None] | None = None
    #: The secrets of an instance configuration whose tool could not be loaded (set where the
    #: load failed; a loaded tool knows its own, ``LoadedTool.secret_values``).
    config_secrets: frozenset[str] = frozenset()
    #: ``call_secrets``' answer; None until asked, and again when the tool or action changes
    #: (``Executor.prepare``).
    secrets: frozenset[str] | None = None

    def __init__(
        self, call: ToolCall, key: str, turn: Turn, message_id: str | None, run_id: str
    ) -> None:
        self.call = call
        self.key = key
        self.turn = turn
        self.message_id = message_id
        self.run_id = run_id
        self.tool = call.tool
        self.action = call.action

    @property
    def arguments(self) -> Mapping[str, Any]:
        """The arguments as the model (or the operator) gave them."""
        return self.call.arguments


@final
class Withheld:
    """The secret arguments of paused calls, by key, held in this process's memory only (the
    ledger keeps them redacted): a call holding them can be approved only where it paused.
    Bounded: the oldest are forgotten first."""

    LIMIT = 10_000

    def __init__(self) -> None:
        self._values: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def put(self, key: str, values: dict[str, Any]) -> None:
        """Keep a paused call's secret arguments."""
        with self._lock:
            self._values[key] = values
            while len(self._values) > self.LIMIT:
                del self._values[next(iter(self._values))]

    def get(self, key: str) -> dict[str, Any] | None:
        """A paused call's secret arguments, or None when this process does not hold them."""
        with self._lock:
            return self._values.get(key)

    def forget(self, key: str) -> None:
        """Drop them once the call is decided."""
        with self._lock:
            self._values.pop(key, None)


def owner_of(step: Step) -> str | None:
    """Whose instance the call uses: a stored instance's owner (None: shared by the
    operator), else the loaded instance's (the invoker for a user-scoped tool)."""
    bindings = step.turn.bindings
    binding = bindings.get(step.call.instance_id or "") if bindings else None
    if binding is not None and binding.stored:
        return binding.owner_id
    return None if step.loaded is None else step.loaded.user_id


def delegated_from(step: Step) -> str | None:
    """The owner of the call's instance when that is not the invoker (a delegation)."""
    bindings = step.turn.bindings
    binding = bindings.get(step.call.instance_id or "") if bindings else None
    return None if binding is None else binding.delegated_from(step.turn.user_id)


def secret_names(step: Step) -> frozenset[str]:
    """The parameter names the call's action marks secret (``Annotated[T, Secret]``)."""
    spec = step.spec
    return frozenset() if spec is None else spec.secret_parameters


def call_secrets(step: Step) -> frozenset[str]:
    """Every secret text the call knows: its instance's secret configuration values, and the
    values of its secret arguments (secret-looking names, names the action marks secret, and
    the operator's fixed values under such names). Hidden from every event, ledger field and
    log record of the call (``hide_secrets``, ``redaction.log_hidden``). Computed once, on
    first use, and again once the tool and action are known."""
    secrets = step.secrets
    if secrets is None:
        secrets = step.secrets = _known_secrets(step)
    return secrets


def _instance_secrets(step: Step) -> frozenset[str]:
    loaded = step.loaded
    return step.config_secrets if loaded is None else loaded.secret_values


def _known_secrets(step: Step) -> frozenset[str]:
    spec = step.spec
    names = frozenset() if spec is None else spec.secret_parameters
    arguments = step.call.arguments
    found: frozenset[str] = frozenset()
    try:
        if type(arguments) is dict or isinstance(arguments, Mapping):
            found = secrets_under(arguments, names)
        if spec is not None and spec.fixed:
            found |= secrets_under(spec.fixed, names)
    except Exception as exc:  # arguments made in Python that cannot be read (``Host.call``)
        logger.warning(
            "the arguments of call %s cannot be searched for secrets: %s",
            echo(step.key),
            type(exc).__name__,
        )
    instance = _instance_secrets(step)
    return found | instance if found else instance


def hide_secrets(step: Step, value: Any) -> Any:
    """``value`` with the call's secrets hidden (``call_secrets``); itself when there are none."""
    secrets = call_secrets(step)
    return hide_values(value, secrets) if secrets else value


def resume_request(step: Step, reason: str | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """What a paused call keeps in the ledger so any worker can resume it, and the secret
    arguments withheld from it (kept only in this process's memory, never written).

    An argument is withheld whole when anything in it is secret (by name, or marked by the
    action); the request keeps it redacted and lists its name under ``withheld``."""
    call = step.call
    arguments = step.arguments
    recorded = hide_secrets(step, redact(arguments, secret_names(step)))
    withheld = (
        {}
        if recorded is arguments
        else {name: value for name, value in arguments.items() if recorded.get(name) != value}
    )
    request: dict[str, Any] = {
        "reason": reason,
        "call_id": call.call_id,
        "name": call.name,
        "instance_id": call.instance_id,
        "tool": call.tool,
        "action": call.action,
        "arguments": recorded,
        "extras": _json_extras(call.extras),
        "headless": step.turn.headless,
        "message_id": step.message_id,
        "run_id": step.run_id,
    }
    if withheld:
        request["withheld"] = sorted(withheld)
    binding = step.turn.bindings.get(call.instance_id or "")
    if binding is not None and binding.stored:
        # Reloaded by id when the call resumes: its current configuration, or a denial when
        # it was removed or switched off meanwhile.
        request["stored_instance"] = True
        request["revision"] = binding.revision
    elif binding is not None and binding.snapshot is not None:
        secret = None if step.loaded is None else step.loaded.secret_fields
        request.update(_kept_config(binding.snapshot, secret))
    return request, withheld


def _kept_config(config: Mapping[str, Any], secret: frozenset[str] | None) -> dict[str, Any]:
    """What a paused call keeps of its instance's configuration: all of it, unless it holds
    secrets (declared by the tool's ``ConfigField(secret=True)`` or by their names; never
    written to the ledger) or is not JSON; then only that it was withheld."""
    if secret is None or not secret.isdisjoint(config):
        return {"config_withheld": True}
    try:
        data = to_json_value(dict(config))
    except NotJSON:
        return {"config_withheld": True}
    if redact(data) != data:
        return {"config_withheld": True}
    return {"config": data}


def _json_extras(extras: Mapping[str, Any]) -> dict[str, Any]:
    return {
        key: base64.b64encode(value).decode() if isinstance(value, bytes | bytearray) else value
        for key, value in extras.items()
    }


def recorded_arguments(step: Step) -> Mapping[str, Any]:
    """The call's arguments as events and the ledger show them: secrets hidden (computed
    once per call; unreadable arguments are not shown)."""
    if step.redacted is None:
        arguments = step.arguments
        if type(arguments) is not dict and not isinstance(arguments, Mapping):
            step.redacted = {}
        else:
            spec = step.spec
            try:
                redacted = redact(
                    arguments, frozenset() if spec is None else spec.secret_parameters
                )
            except Exception:  # arguments no check has seen yet (e.g. nested too deep)
                redacted = {"(arguments)": "not recorded: they could not be read"}
            else:
                secrets = step.secrets
                if secrets is None:
                    if redacted is arguments and (spec is None or not spec.fixed):
                        # Nothing is secret by name (the common call): the call's secrets
                        # are its instance's, known without searching the arguments again.
                        loaded = step.loaded
                        secrets = step.config_secrets if loaded is None else loaded.secret_values
                        step.secrets = secrets
                    else:
                        secrets = call_secrets(step)
                if secrets:
                    # The model may pass an instance's own credential back as an argument,
                    # or repeat a secret argument's value in another.
                    redacted = hide_values(redacted, secrets)
            step.redacted = redacted
    return step.redacted
