"""``host.instances``: add, read, change and remove stored tool instances; resolve a user's
instances for a turn, their credentials decrypted with the owner's key."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, final

import attrs

from expediter.core.instances.defaults import default_instance_id, default_tools
from expediter.core.instances.records import StoredInstance
from expediter.core.instances.store import InstanceRow
from expediter.core.instances.validation import check_operator_fields, validate_config
from expediter.core.records.text import clean_text, echo
from expediter.core.turns.toolset import ToolInstance
from expediter.errors import (
    ArgumentError,
    ConfigError,
    CredentialError,
    IdentifierError,
    InstanceNotFound,
)

if TYPE_CHECKING:
    from expediter.core.discovery.catalogue import ToolInfo
    from expediter.core.instances.keys import Keyring
    from expediter.core.instances.store import InstanceStore
    from expediter.core.instances.tokens import InstanceTokens

__all__ = ["ANY_USER", "Instances", "Offered", "Rotation"]

logger = logging.getLogger(__name__)


class _AnyUser:
    def __repr__(self) -> str:
        return "ANY_USER"


#: ``user_id`` meaning "whoever owns it" (the operator's view), distinct from None (shared).
ANY_USER: Any = _AnyUser()
#: The longest display name.
NAME_LIMIT = 64
_OVERRIDE_KEYS = frozenset({"active", "require_approval", "fixed"})


@attrs.frozen
class Offered:
    """What a user's toolset holds from the database: stored instances, default tools."""

    instances: tuple[ToolInstance, ...]
    #: Default tools as ``(instance id, tool name)``, in catalogue order.
    defaults: tuple[tuple[str, str], ...]
    #: Instances that could not be offered (their credentials would not decrypt...).
    errors: tuple[str, ...] = ()


@attrs.frozen
class Rotation:
    """What ``keys rotate`` did, counting instances' credentials and OAuth token slots."""

    resealed: int
    #: Already sealed with the newest key.
    current: int
    #: ``(instance id, reason)`` of blobs that could not be opened (left as they are).
    failed: tuple[tuple[str, str], ...] = ()
    #: How many of ``resealed`` were OAuth token slots.
    tokens: int = 0


def _user(user_id: Any) -> Any:
    """A user id exactly as given (``ANY_USER`` and None as they are): owners are compared as
    stored, so an id the database would not keep exactly is refused (``IdentifierError``),
    never changed into one that may be another user's."""
    if user_id is ANY_USER or user_id is None:
        return user_id
    return IdentifierError.check(user_id, "user id")


def _instance(instance_id: Any, what: str = "instance id") -> str:
    """An instance id exactly as given, or ``IdentifierError`` (see ``_user``)."""
    return IdentifierError.check(instance_id, what)


def _name(value: str | None, tool: str) -> str:
    if value:
        # Control characters are left out of a display name below, but NUL and lone
        # surrogates are refused like an id's: a name is what `call NAME` finds it by. Its
        # length is the rule below.
        IdentifierError.check(value, "instance name", limit=None)
    name = clean_text(str(value if value is not None else tool)).strip()
    if not name or len(name) > NAME_LIMIT:
        raise ArgumentError(f"an instance name is 1 to {NAME_LIMIT} characters", parameter="name")
    return name


def _check_overrides(
    info: ToolInfo, actions: Mapping[str, Mapping[str, Any]] | None
) -> dict[str, dict[str, Any]]:
    if not actions:
        return {}
    known = {action.name for action in info.actions}
    checked: dict[str, dict[str, Any]] = {}
    for name, override in actions.items():
        if known and name not in known:
            raise ArgumentError(
                f"tool {info.name!r} has no action {echo(name)} "
                f"(actions: {', '.join(sorted(known))})",
                parameter="actions",
            )
        if not isinstance(override, Mapping) or not set(override) <= _OVERRIDE_KEYS:
            raise ArgumentError(
                f"the override of action {echo(name)} takes only "
                f"{', '.join(sorted(_OVERRIDE_KEYS))}",
                parameter="actions",
            )
        fixed = override.get("fixed")
        if fixed is not None and not isinstance(fixed, Mapping):
            raise ArgumentError(
                f"the fixed values of action {echo(name)} are an object", parameter="actions"
            )
        checked[str(name)] = dict(override)
    return checked


@final
class Instances:
    """Stored tool instances (``host.instances``).

    ``user_id`` on reads and changes: a user id limits it to what that user owns (the shared
    instances too, for reads); left out, the operator reaches every instance. Secret fields are
    sealed with the owner's key on save, returned only with ``decrypt=True``, and kept when an
    update leaves them out.
    """

    def __init__(
        self,
        *,
        store: Callable[[], InstanceStore],
        keyring: Callable[[], Keyring],
        tool_info: Callable[[str], ToolInfo],
        catalogue: Callable[[], Sequence[ToolInfo]],
        default_names: frozenset[str] | None,
    ) -> None:
        self._store = store
        self._keyring = keyring
        self._tool_info = tool_info
        self._catalogue = catalogue
        self._default_names = default_names
        #: Resolved instances by id: ``(revision, ToolInstance)`` (decrypted once per change).
        self._resolved: dict[str, tuple[int, ToolInstance]] = {}
        self._defaults: tuple[tuple[tuple[str, str], ...], tuple[str, ...]] | None = None
        #: Default tools' instance ids by tool name (from ``defaults``).
        self._default_ids: dict[str, str] = {}
        #: ``InstanceTokens`` by instance id (a call's ``CallContext.tokens`` reads no row).
        self._tokens: dict[str, InstanceTokens] = {}
        #: No usable key is configured (the host's configuration is read once): calls get no
        #: ``CallContext.tokens``.
        self._keyless = False
        self._lock = threading.Lock()

    # -- default tools --------------------------------------------------------------------------

    def defaults(self) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]]:
        """The default tools as ``(instance id, tool)``, and why any listed one is refused."""
        if self._defaults is None:
            found, problems = default_tools(self._catalogue(), self._default_names, self._tool_info)
            for problem in problems:
                logger.error("%s", problem)
            pairs = tuple((default_instance_id(info.name), info.name) for info in found)
            self._default_ids = {tool: instance_id for instance_id, tool in pairs}
            self._defaults = (pairs, tuple(problems))
        return self._defaults

    def default_id(self, tool: str) -> str | None:
        """A default tool's instance id, or None when the tool is not a default."""
        self.defaults()
        return self._default_ids.get(tool)

    # -- reading --------------------------------------------------------------------------------

    def _row(
        self,
        instance_id: str,
        user_id: Any,
        *,
        shared: bool = True,
        row: InstanceRow | None = None,
    ) -> InstanceRow:
        """The configured instance a user may reach (``row``: already read)."""
        if row is None:
            row = self._store().get(_instance(instance_id))
        if row is None or row.kind != "configured":
            raise InstanceNotFound(f"no tool instance {echo(instance_id)}")
        if (
            user_id is not ANY_USER
            and row.owner_id != user_id
            and not (shared and row.owner_id is None)
        ):
            raise InstanceNotFound(f"no tool instance {echo(instance_id)}")
        return row

    def _open(self, row: InstanceRow) -> dict[str, Any]:
        if row.credentials is None:
            return {}
        try:
            return self._keyring().unseal(row.credentials, owner_id=row.owner_id, context=row.id)
        except CredentialError as exc:
            raise CredentialError(
                f"the credentials of tool instance {row.name!r} ({row.id}) cannot be read: {exc}"
            ) from None

    def _record(self, row: InstanceRow, *, decrypt: bool) -> StoredInstance:
        return StoredInstance(
            id=row.id,
            name=row.name,
            tool=row.tool,
            owner_id=row.owner_id,
            enabled=row.enabled,
            config=dict(row.config),
            secret_fields=row.secret_fields,
            secrets=self._open(row) if decrypt else None,
            actions=dict(row.actions),
            created_at=row.created_at,
            updated_at=row.updated_at,
            revision=row.revision,
        )

    def get(
        self, instance_id: str, *, user_id: Any = ANY_USER, decrypt: bool = False
    ) -> StoredInstance:
        """One instance (InstanceNotFound when there is none, or the user may not see it)."""
        return self._record(self._row(instance_id, _user(user_id)), decrypt=decrypt)

    def list(self, user_id: Any = ANY_USER, *, decrypt: bool = False) -> list[StoredInstance]:
        """Every instance (left out), or those a user owns plus the shared ones (None: only
        the shared ones); oldest first."""
        store = self._store()
        user_id = _user(user_id)
        rows = store.rows(every=True) if user_id is ANY_USER else store.rows(owner=user_id)
        return [self._record(row, decrypt=decrypt) for row in rows]

    # -- changing -------------------------------------------------------------------------------

    def _seal(
        self, owner_id: str | None, instance_id: str, secrets: Mapping[str, Any]
    ) -> tuple[str | None, str | None]:
        if not secrets:
            return None, None
        keyring = self._keyring()
        blob = keyring.seal(dict(secrets), owner_id=owner_id, context=instance_id)
        return blob, keyring.newest.id

    def add(
        self,
        tool: str,
        name: str | None = None,
        config: Mapping[str, Any] | None = None,
        *,
        user_id: str | None = None,
        enabled: bool = True,
        actions: Mapping[str, Mapping[str, Any]] | None = None,
        operator: bool = False,
    ) -> StoredInstance:
        """Store a new instance of ``tool`` owned by ``user_id`` (None: shared by the operator
        with every user); its configuration is checked against the tool's fields, its secret
        fields sealed with the owner's key. Fields only an operator may set
        (``ConfigField.operator_only``, e.g. ``allow_networks``) need ``operator=True``."""
        info = self._tool_info(tool)
        user_id = _user(user_id)
        display = _name(name, tool)
        if not operator:
            check_operator_fields(tool, info.config, dict(config or {}))
        valid = validate_config(tool, info.config, dict(config or {}))
        overrides = _check_overrides(info, actions)
        store = self._store()
        self._check_unique(store, user_id, display, None)
        instance_id = str(uuid.uuid4())
        credentials, key_id = self._seal(user_id, instance_id, valid.secrets)
        now = time.time()
        row = InstanceRow(
            id=instance_id,
            owner_id=user_id,
            tool=tool,
            name=display,
            config=valid.plain,
            credentials=credentials,
            secret_fields=tuple(sorted(valid.secrets)),
            key_id=key_id,
            actions=overrides,
            enabled=bool(enabled),
            created_at=now,
            updated_at=now,
        )
        store.insert(row)
        logger.info(
            "tool instance %s added", instance_id, extra={"tool": tool, "owner_id": user_id}
        )
        return self._record(row, decrypt=False)

    def _check_unique(
        self, store: InstanceStore, owner: str | None, name: str, instance_id: str | None
    ) -> None:
        for row in store.rows(owner=owner):
            if row.owner_id == owner and row.name == name and row.id != instance_id:
                raise ArgumentError(
                    f"{'the operator' if owner is None else repr(owner)} has an instance named "
                    f"{name!r} already ({row.id}); choose another name",
                    parameter="name",
                )

    def update(
        self,
        instance_id: str,
        *,
        name: str | None = None,
        config: Mapping[str, Any] | None = None,
        enabled: bool | None = None,
        actions: Mapping[str, Mapping[str, Any]] | None = None,
        user_id: Any = ANY_USER,
        operator: bool = False,
    ) -> StoredInstance:
        """Change an instance: ``config`` keys replace the stored ones (None removes one);
        secret fields left out keep their stored values. Changing a field only an operator may
        set needs ``operator=True``."""
        store = self._store()
        user_id = _user(user_id)
        for _ in range(5):
            row = self._row(instance_id, user_id, shared=False)
            info = self._tool_info(row.tool)
            display = row.name if name is None else _name(name, row.tool)
            if display != row.name:
                self._check_unique(store, row.owner_id, display, row.id)
            if config is not None:
                if not operator:
                    check_operator_fields(row.tool, info.config, config, row.config)
                merged: dict[str, Any] = {**row.config, **self._open(row)}
                for key, value in config.items():
                    if value is None:
                        merged.pop(key, None)
                    else:
                        merged[key] = value
                valid = validate_config(row.tool, info.config, merged)
                credentials, key_id = self._seal(row.owner_id, row.id, valid.secrets)
                plain, secret_fields = valid.plain, tuple(sorted(valid.secrets))
            else:
                credentials, key_id = row.credentials, row.key_id
                plain, secret_fields = dict(row.config), row.secret_fields
            changed = attrs.evolve(
                row,
                name=display,
                config=plain,
                credentials=credentials,
                key_id=key_id,
                secret_fields=secret_fields,
                actions=row.actions if actions is None else _check_overrides(info, actions),
                enabled=row.enabled if enabled is None else bool(enabled),
                updated_at=time.time(),
            )
            if store.replace(changed, revision=row.revision):
                return self._record(attrs.evolve(changed, revision=row.revision + 1), decrypt=False)
        raise ArgumentError(f"tool instance {instance_id} keeps changing; try again")

    def remove(self, instance_id: str, *, user_id: Any = ANY_USER) -> None:
        """Delete an instance, the records its tool kept with it, and users' switches for it."""
        row = self._row(instance_id, _user(user_id), shared=False)
        self._store().delete(row.id)
        with self._lock:
            self._resolved.pop(row.id, None)
            self._tokens.pop(row.id, None)

    def _switch(self, id_or_tool: str, user_id: str | None, enabled: bool) -> str:
        store = self._store()
        user_id = _user(user_id)
        id_or_tool = _instance(id_or_tool, "instance id or tool")
        row = store.get(id_or_tool)
        if row is not None and row.kind == "configured":
            if user_id is None or row.owner_id == user_id:
                self.update(row.id, enabled=enabled)
                return row.id
            if row.owner_id is not None:
                raise InstanceNotFound(f"no tool instance {echo(id_or_tool)}")
            store.set_setting(user_id, row.id, enabled)
            return row.id
        default = self.default_id(id_or_tool) if row is None else row.id
        if default is None:
            if enabled:
                _, problems = default_tools(self._catalogue(), [id_or_tool], self._tool_info)
                if problems:
                    raise ConfigError(problems[0])
            raise InstanceNotFound(
                f"{echo(id_or_tool)} is neither a stored instance nor a default tool"
            )
        tool = id_or_tool if row is None else row.tool
        if user_id is not None:
            store.set_setting(user_id, default, enabled)
        else:
            self.anchor(default, tool, "default")
            current = store.get(default)
            assert current is not None
            store.replace(
                attrs.evolve(current, enabled=enabled, updated_at=time.time()),
                revision=current.revision,
            )
        return default

    def enable(self, id_or_tool: str, *, user_id: str | None = None) -> str:
        """Switch an instance or a default tool on (for ``user_id`` only, when given, if they do
        not own it); returns the instance id."""
        return self._switch(id_or_tool, user_id, True)

    def disable(self, id_or_tool: str, *, user_id: str | None = None) -> str:
        """Switch an instance or a default tool off (for ``user_id`` only, when given: a user
        opting out of a default tool or a shared instance); returns the instance id."""
        return self._switch(id_or_tool, user_id, False)

    def anchor(self, instance_id: str, tool: str, kind: str, name: str | None = None) -> None:
        """Make sure an instance has a row for its tool's records (a default tool's, or an
        instance the application passed in memory)."""
        now = time.time()
        self._store().insert(
            InstanceRow(
                id=_instance(instance_id),
                owner_id=None,
                tool=tool,
                name=name or tool,
                kind=kind,
                created_at=now,
                updated_at=now,
            )
        )

    # -- keys -----------------------------------------------------------------------------------

    def rotate(self) -> Rotation:
        """Reseal every instance's credentials and OAuth tokens with the newest key, one blob
        at a time: interrupted, it resumes where it stopped, and no blob is ever lost."""
        from expediter.core.instances.tokens import reseal_tokens

        keyring = self._keyring()
        newest = keyring.newest
        store = self._store()
        resealed = current = 0
        failed: list[tuple[str, str]] = []
        for instance_id, owner_id, blob, _ in store.sealed():
            if not keyring.needs_rotation(blob):
                current += 1
                continue
            try:
                values = keyring.unseal(blob, owner_id=owner_id, context=instance_id)
            except CredentialError as exc:
                failed.append((instance_id, str(exc)))
                continue
            new = keyring.seal(values, owner_id=owner_id, context=instance_id)
            if store.reseal(instance_id, blob, new, newest.id):
                resealed += 1
        tokens, tokens_current, tokens_failed = reseal_tokens(store, keyring)
        return Rotation(
            resealed + tokens, current + tokens_current, (*failed, *tokens_failed), tokens
        )

    # -- OAuth tokens -----------------------------------------------------------------------------

    def tokens(self, instance_id: str, *, user_id: Any = ANY_USER) -> InstanceTokens:
        """The OAuth tokens a stored instance keeps per user, sealed with its owner's key
        (InstanceNotFound as ``get``; CredentialError when no key is configured)."""
        row = self._row(instance_id, _user(user_id))
        keyring = self._keyring()
        with self._lock:
            found = self._tokens.get(row.id)
        if found is not None and found.owner_id == row.owner_id:
            return found
        return self._keep_tokens(row.id, row.owner_id, keyring)

    def call_tokens(self, instance_id: str, owner_id: str | None) -> InstanceTokens | None:
        """A call's ``CallContext.tokens`` for a stored instance it resolved (``owner_id``
        from its row): no database read, None when no key is configured."""
        found = self._tokens.get(instance_id)
        if found is not None and found.owner_id == owner_id:
            return found
        if self._keyless:
            return None
        try:
            keyring = self._keyring()
        except CredentialError:
            self._keyless = True
            return None
        return self._keep_tokens(instance_id, owner_id, keyring)

    def _keep_tokens(
        self, instance_id: str, owner_id: str | None, keyring: Keyring
    ) -> InstanceTokens:
        from expediter.core.instances.tokens import InstanceTokens

        made = InstanceTokens(self._store(), keyring, instance_id=instance_id, owner_id=owner_id)
        with self._lock:
            if len(self._tokens) >= 4096:
                self._tokens.clear()
            self._tokens[instance_id] = made
        return made

    # -- a user's toolset -------------------------------------------------------------------------

    def _resolve(self, row: InstanceRow) -> ToolInstance:
        with self._lock:
            cached = self._resolved.get(row.id)
        if cached is not None and cached[0] == row.revision:
            return cached[1]
        config = {**row.config, **self._open(row)}
        resolved = ToolInstance(
            tool=row.tool,
            instance_id=row.id,
            name=row.name,
            config=config,
            owner_id=row.owner_id,
            actions=row.actions,
            stored=True,
            revision=row.revision,
        )
        with self._lock:
            if len(self._resolved) > 4096:
                self._resolved.clear()
            self._resolved[row.id] = (row.revision, resolved)
        return resolved

    def offered(self, user_id: str | None) -> Offered:
        """A user's enabled stored instances (theirs and the shared ones) and default tools:
        two small reads, and a decryption only for an instance that changed."""
        store = self._store()
        user_id = _user(user_id)
        summaries = store.summaries(user_id)
        settings = store.settings(user_id) if user_id is not None else {}
        switched_off = {instance_id for instance_id, on in settings.items() if not on}
        wanted: list[str] = []
        for summary in summaries:
            if summary.kind == "default":
                if not summary.enabled:
                    switched_off.add(summary.id)
                continue
            if not summary.enabled or summary.id in switched_off:
                continue
            wanted.append(summary.id)
        revisions = {summary.id: summary.revision for summary in summaries}
        instances: list[ToolInstance] = []
        errors: list[str] = []
        stale: list[str] = []
        with self._lock:
            for instance_id in wanted:
                cached = self._resolved.get(instance_id)
                if cached is not None and cached[0] == revisions[instance_id]:
                    instances.append(cached[1])
                else:
                    stale.append(instance_id)
        if stale:
            rows = store.get_many(stale)
            for instance_id in stale:
                row = rows.get(instance_id)
                if row is None:
                    continue
                try:
                    instances.append(self._resolve(row))
                except CredentialError as exc:
                    errors.append(str(exc))
                    logger.error("tool instance %s is not offered: %s", instance_id, exc)
            order = {instance_id: index for index, instance_id in enumerate(wanted)}
            instances.sort(key=lambda item: order[item.instance_id or ""])
        defaults = tuple(
            (instance_id, tool)
            for instance_id, tool in self.defaults()[0]
            if instance_id not in switched_off
        )
        return Offered(tuple(instances), defaults, tuple(errors))

    def binding(self, instance_id: str, user_id: Any = ANY_USER) -> ToolInstance:
        """A stored instance resolved to run (credentials decrypted): InstanceNotFound when it
        is gone, or disabled (by its owner, or by ``user_id`` for a shared one)."""
        found = self.lookup(instance_id, user_id)
        if found is None:
            raise InstanceNotFound(f"no tool instance {echo(instance_id)}")
        return found

    def lookup(self, instance_id: str, user_id: Any = ANY_USER) -> ToolInstance | None:
        """``binding``, but None when there is no such instance (one read either way)."""
        user_id = _user(user_id)
        row = self._store().get(_instance(instance_id))
        if row is None or row.kind != "configured":
            return None
        row = self._row(instance_id, user_id, row=row)
        if not row.enabled:
            raise InstanceNotFound(f"tool instance {row.name!r} ({row.id}) is disabled")
        shared = user_id is not ANY_USER and user_id is not None and row.owner_id is None
        if shared and self._store().settings(user_id).get(row.id) is False:
            raise InstanceNotFound(
                f"tool instance {row.name!r} ({row.id}) is disabled for {echo(user_id)}"
            )
        return self._resolve(row)
