"""The OAuth tokens a tool instance keeps per user (``CallContext.tokens``,
``host.instances.tokens(id)``): access and refresh tokens, a dynamically registered client.

Each slot is one row of ``oauth_tokens`` holding a JSON object sealed with the instance owner's
key and bound to its row (instance, user, slot name): a blob copied to another row or instance
does not open. Every read and write is one short autocommit statement.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, final

from expediter.core.records.text import echo
from expediter.errors import ArgumentError, CredentialError, IdentifierError, InstanceNotFound

if TYPE_CHECKING:
    from expediter.core.instances.keys import Keyring
    from expediter.core.instances.store import InstanceStore

__all__ = ["TOKEN_LIMIT", "InstanceTokens", "reseal_tokens", "token_context", "user_key"]

#: The largest value (its JSON) a slot holds.
TOKEN_LIMIT: Final = 64 * 1024
_SLOT = re.compile(r"[a-z][a-z0-9_]{0,63}")
#: Slots read per page by ``reseal_tokens``.
_PAGE = 500


def user_key(user_id: str | None) -> str:
    """A user id as token rows keep it: exactly as given, '' for calls made without a user
    (``tool_records``' form); ``IdentifierError`` for one that cannot be kept exactly (the
    empty id among them), so one user's slot is never read as another's."""
    return "" if user_id is None else IdentifierError.check(user_id, "user id")


def token_context(instance_id: str, user: str, name: str) -> str:
    """What a slot's blob is bound to: its row (instance id, user key, slot name)."""
    return json.dumps(["oauth_tokens", instance_id, user, name])


def _slot(name: object) -> str:
    if not isinstance(name, str) or not _SLOT.fullmatch(name):
        raise ArgumentError(
            "a token slot name is a lower case letter, then lower case letters, digits and _ "
            f"(at most 64), not {echo(name)}",
            parameter="name",
        )
    return name


def _plaintext(data: Mapping[str, Any]) -> bytes:
    """The slot's JSON (what ``Keyring.seal`` would write), checked; the message never holds
    a value."""
    if not isinstance(data, Mapping):
        raise ArgumentError(
            f"OAuth tokens are a JSON object, not {type(data).__name__}", parameter="data"
        )
    try:
        text = json.dumps(dict(data), sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        raise ArgumentError(
            "OAuth tokens must be JSON: strings, numbers, booleans, null, lists and objects "
            "with string keys",
            parameter="data",
        ) from None
    if len(text) > TOKEN_LIMIT:
        raise ArgumentError(
            f"a token slot holds at most {TOKEN_LIMIT // 1024} KiB of JSON; this value is "
            f"{len(text) // 1024} KiB",
            parameter="data",
        )
    return text.encode("ascii")


def _expiry(expires_at: object) -> float | None:
    if expires_at is None:
        return None
    if isinstance(expires_at, bool) or not isinstance(expires_at, (int, float)):
        raise ArgumentError(
            "expires_at is seconds since the epoch (a number) or None", parameter="expires_at"
        )
    value = float(expires_at)
    if not math.isfinite(value):
        raise ArgumentError("expires_at must be a finite number", parameter="expires_at")
    return value


@final
class InstanceTokens:
    """The OAuth tokens one tool instance keeps, per user (its owner, or each invoker)."""

    __slots__ = ("_keyring", "_store", "instance_id", "owner_id")

    def __init__(
        self,
        store: InstanceStore,
        keyring: Keyring,
        *,
        instance_id: str,
        owner_id: str | None,
    ) -> None:
        self._store = store
        self._keyring = keyring
        #: The stored instance the tokens belong to.
        self.instance_id = instance_id
        #: Its owner (as stored; None: shared): the tokens are sealed with this owner's key.
        self.owner_id = owner_id

    def __repr__(self) -> str:
        return f"InstanceTokens(instance_id={self.instance_id!r})"

    def _fail(self, name: str, exc: CredentialError) -> CredentialError:
        return CredentialError(
            f"the OAuth tokens {name!r} of tool instance {self.instance_id} cannot be read: {exc}"
        )

    def get(self, user_id: str | None, name: str = "tokens") -> dict[str, Any] | None:
        """A user's value in slot ``name``, or None when there is none (CredentialError when
        it does not decrypt: another key, another row's blob, or changed)."""
        name = _slot(name)
        user = user_key(user_id)
        blob = self._store.token(self.instance_id, user, name)
        if blob is None:
            return None
        try:
            return self._keyring.unseal(
                blob, owner_id=self.owner_id, context=token_context(self.instance_id, user, name)
            )
        except CredentialError as exc:
            raise self._fail(name, exc) from None

    def put(
        self,
        user_id: str | None,
        data: Mapping[str, Any],
        *,
        name: str = "tokens",
        expires_at: float | None = None,
    ) -> None:
        """Keep ``data`` (a JSON object of at most ``TOKEN_LIMIT`` characters) in a user's slot
        ``name``, replacing what it held; ``expires_at`` (seconds since the epoch) is kept in
        plain for operators. InstanceNotFound when the instance was removed."""
        name = _slot(name)
        plaintext = _plaintext(data)
        expiry = _expiry(expires_at)
        user = user_key(user_id)
        blob = self._keyring.encrypt(
            plaintext, owner_id=self.owner_id, context=token_context(self.instance_id, user, name)
        )
        if not self._store.put_token(self.instance_id, user, name, blob, expiry):
            raise InstanceNotFound(f"no tool instance {echo(self.instance_id)}")

    def delete(self, user_id: str | None, name: str | None = None) -> None:
        """Forget a user's slot ``name``, or every slot of theirs (``name`` None)."""
        self._store.delete_tokens(
            self.instance_id, user_key(user_id), None if name is None else _slot(name)
        )


def reseal_tokens(store: InstanceStore, keyring: Keyring) -> tuple[int, int, list[tuple[str, str]]]:
    """Reseal every token slot with the newest key (``keys rotate``), a page at a time:
    ``(resealed, already current, [(instance id, reason)])``; a slot that does not open is
    left as it is."""
    resealed = current = 0
    failed: list[tuple[str, str]] = []
    after: tuple[str, str, str] | None = None
    while True:
        page = store.sealed_tokens(after, _PAGE)
        for instance_id, owner_id, user, name, blob in page:
            if not keyring.needs_rotation(blob):
                current += 1
                continue
            context = token_context(instance_id, user, name)
            try:
                plaintext = keyring.decrypt(blob, owner_id=owner_id, context=context)
            except CredentialError as exc:
                failed.append((instance_id, f"the OAuth tokens {name!r} of {echo(user)}: {exc}"))
                continue
            new = keyring.encrypt(plaintext, owner_id=owner_id, context=context)
            if store.reseal_token((instance_id, user, name), blob, new):
                resealed += 1
        if len(page) < _PAGE:
            return resealed, current, failed
        after = (page[-1][0], page[-1][2], page[-1][3])
