"""The credential keyring: master keys from ``EXPEDITER_SECRET_KEYS``, per-owner AES-256-GCM keys
derived with HKDF, and the ``ex1.<key id>.<data>`` blobs stored credentials are kept in."""

from __future__ import annotations

import binascii
import itertools
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, final

import attrs

from expediter.errors import CredentialError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

logger = logging.getLogger(__name__)

__all__ = [
    "ENV_KEYS",
    "ENV_KEYS_FILE",
    "EXAMPLE_KEY",
    "EXAMPLE_KEYS",
    "KEY_BYTES",
    "Keyring",
    "MasterKey",
    "generate_key",
    "key_id",
]

KEY_BYTES: Final = 32
ENV_KEYS: Final = "EXPEDITER_SECRET_KEYS"
ENV_KEYS_FILE: Final = "EXPEDITER_SECRET_KEYS_FILE"
#: The key the documentation shows (base64 of ``b"expediter-example-key-do-not-use"``).
EXAMPLE_KEY: Final = "ZXhwZWRpdGVyLWV4YW1wbGUta2V5LWRvLW5vdC11c2U="
#: Documented example keys (docs show one of them); refused wherever configured.
EXAMPLE_KEYS: Final = frozenset({EXAMPLE_KEY, "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="})

_VERSION: Final = "ex1"
_KEY_ID_CHARS: Final = 16
#: ``"ex1." + key id + "."``: the head every blob starts with (and the start of its AAD).
_HEAD_LENGTH: Final = len(_VERSION) + 1 + _KEY_ID_CHARS + 1
_NONCE_BYTES: Final = 12
_TAG_BYTES: Final = 16
_OWNER_INFO: Final = b"expediter owner key v1\0"
_KEY_ID_INFO: Final = b"expediter key id\0"
#: Derived ciphers kept per (blob head, owner); cleared past this many so memory stays bounded.
_CACHE_LIMIT: Final = 4096
_TO_URLSAFE: Final = bytes.maketrans(b"+/", b"-_")
_GENERATE_HINT: Final = f"generate one with `expediter keys generate` and set {ENV_KEYS}"

# A key must be random, not merely 32 bytes long: ``_weakness`` refuses bytes too regular to be
# secret. Each test fails a key of 32 uniformly random bytes with these exact odds:
#   fewer than 17 distinct byte values (one value, a pattern of period 16 or less):
#     P(at most 16 values among 32 draws from 256) = 2^-48.7;
#   fewer than 17 distinct steps byte[i+1] - byte[i] mod 256 (counters, interleaved counters):
#     the 31 steps of a random key are themselves independent and uniform, so 2^-45.0;
#   8 bytes in a row stepping by one amount (7 equal steps: a run of one value, a count):
#     at most 25 windows * 256^-6 = 2^-43.4;
#   every byte printable ASCII or whitespace (100 values: a password or a phrase):
#     (100/256)^32 = 2^-43.4.
# Together 2^-42.1, about one key in 5 * 10^12; ``generate_key`` draws again when it happens, so
# a key the project generates always passes. test_keys.py recomputes the sum from these values.
_MIN_DISTINCT: Final = 17
_MAX_RUN: Final = 8
_TEXT_BYTES: Final = frozenset(range(0x20, 0x7F)) | frozenset(b"\t\n\v\f\r")


def _encode(data: bytes) -> str:
    """URL-safe base64 without padding."""
    return binascii.b2a_base64(data, newline=False).translate(_TO_URLSAFE).rstrip(b"=").decode()


def _decode(text: str) -> bytes:
    """URL-safe base64, padding optional; raises ValueError (``binascii.Error``: not base64)."""
    # The non-strict decoder ignores excess padding, so "==" saves computing the amount.
    return binascii.a2b_base64(text.replace("-", "+").replace("_", "/") + "==")


_URLSAFE_ALPHABET: Final = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
)
#: The example keys' bytes (all zeros among them), refused however they are written.
_EXAMPLE_MATERIALS: Final = frozenset({bytes(KEY_BYTES), *map(_decode, EXAMPLE_KEYS)})


def generate_key() -> str:
    """A new random master key: 32 bytes as URL-safe base64 with padding (44 characters),
    drawn again in the rare case (below 2^-42) ``_weakness`` would refuse them."""
    material = os.urandom(KEY_BYTES)
    while _weakness(material) is not None:
        material = os.urandom(KEY_BYTES)
    return binascii.b2a_base64(material, newline=False).translate(_TO_URLSAFE).decode()


def _weakness(material: bytes) -> str | None:
    """Why a key's bytes are too regular to be secret (the tests above), or None. The reason
    describes the flaw, never the bytes."""
    if len(set(material)) < _MIN_DISTINCT:
        return f"fewer than {_MIN_DISTINCT} distinct byte values"
    steps = [(after - before) & 0xFF for before, after in itertools.pairwise(material)]
    if len(set(steps)) < _MIN_DISTINCT:
        return "its bytes follow a simple sequence"
    run = 1
    for before, after in itertools.pairwise(steps):
        run = run + 1 if after == before else 1
        if run >= _MAX_RUN - 1:
            return f"{_MAX_RUN} bytes in a row repeat one value or count by one step"
    if set(material) <= _TEXT_BYTES:
        return "every byte is printable text: a password, not random bytes"
    return None


def key_id(material: bytes) -> str:
    """The key's public id (16 hex characters), derived from the key; not secret."""
    import hashlib

    return hashlib.sha256(_KEY_ID_INFO + material).hexdigest()[:_KEY_ID_CHARS]


@attrs.frozen
class MasterKey:
    """One configured master key."""

    id: str
    """The key's public id (``key_id(material)``); blobs name the key they were sealed with."""
    material: bytes = attrs.field(repr=False)
    """The 32 secret bytes; never shown."""

    @classmethod
    def from_material(cls, material: bytes) -> MasterKey:
        """The master key holding these bytes, with its derived id."""
        return cls(key_id(material), material)


def _owner_key(material: bytes, owner_id: str | None) -> bytes:
    """The AES-256 key of one owner (None: shared), derived from a master key with HKDF-SHA256."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    scope = b"shared" if owner_id is None else b"user:" + owner_id.encode("utf-8", "surrogatepass")
    hkdf = HKDF(algorithm=hashes.SHA256(), length=KEY_BYTES, salt=None, info=_OWNER_INFO + scope)
    return hkdf.derive(material)


def _not_a_blob() -> CredentialError:
    return CredentialError(
        "the value is not an expediter credential blob (expected ex1.<key id>.<data>): "
        "store the credentials again"
    )


def _changed() -> CredentialError:
    return CredentialError(
        "the credential blob cannot be decrypted: it was changed, or it belongs to another owner "
        "or instance; store the credentials again"
    )


def _no_key() -> CredentialError:
    return CredentialError(
        f"no key is configured: set {ENV_KEYS} (generate one with `expediter keys generate`)"
    )


@final
class Keyring:
    """The configured master keys, newest first: encrypts with the newest, decrypts with any."""

    __slots__ = ("_by_id", "_ciphers", "_keys")

    def __init__(self, keys: Sequence[MasterKey]) -> None:
        self._keys = tuple(keys)
        self._by_id: dict[str, MasterKey] = {}
        for key in self._keys:
            self._by_id.setdefault(key.id, key)
        # The decrypt budget (bench_credentials.py: <= 1.5x AESGCM(key).decrypt) needs derived
        # ciphers reused; keyed by the blob's head "ex1.<key id>." so one lookup checks the format.
        self._ciphers: dict[tuple[str, str | None], AESGCM] = {}

    def __repr__(self) -> str:
        return f"Keyring(keys=[{', '.join(key.id for key in self._keys)}])"

    @classmethod
    def parse(
        cls, keys_text: str | None, keys_file: str | os.PathLike[str] | None = None
    ) -> Keyring:
        """The keyring configured by ``EXPEDITER_SECRET_KEYS`` text, else by the keys file."""
        if keys_text and keys_text.strip():
            entries = [
                (f"key {position} in {ENV_KEYS}", text)
                for position, text in enumerate(keys_text.split(","), start=1)
            ]
        elif keys_file is not None and os.fspath(keys_file):
            entries = _file_entries(Path(keys_file))
        else:
            entries = []
        keys: list[MasterKey] = []
        seen: set[bytes] = set()
        for where, text in entries:
            if not text.strip():
                continue
            material = _key_material(where, text.strip())
            if material not in seen:
                seen.add(material)
                _check_strength(where, material, newest=not keys)
                keys.append(MasterKey.from_material(material))
        return cls(keys)

    @property
    def keys(self) -> tuple[MasterKey, ...]:
        """The master keys, newest first."""
        return self._keys

    @property
    def newest(self) -> MasterKey:
        """The key new blobs are encrypted with; CredentialError when none is configured."""
        if not self._keys:
            raise _no_key()
        return self._keys[0]

    def require(self) -> None:
        """Raise CredentialError unless a key is configured."""
        if not self._keys:
            raise _no_key()

    def encrypt(self, plaintext: bytes, *, owner_id: str | None, context: str) -> str:
        """A blob of ``plaintext`` under the newest key, bound to the owner and ``context``."""
        head = f"{_VERSION}.{self.newest.id}."
        cipher = self._ciphers.get((head, owner_id)) or self._cipher(head, owner_id)
        nonce = os.urandom(_NONCE_BYTES)
        sealed = cipher.encrypt(nonce, plaintext, (head + context).encode("utf-8", "surrogatepass"))
        return head + _encode(nonce + sealed)

    def decrypt(self, blob: str, *, owner_id: str | None, context: str) -> bytes:
        """The plaintext of a blob ``encrypt`` made for the same owner and ``context``."""
        head = blob[:_HEAD_LENGTH]
        cipher = self._ciphers.get((head, owner_id))
        if cipher is None:
            cipher = self._cipher(head, owner_id)
        try:
            data = _decode(blob[_HEAD_LENGTH:])
        except ValueError:
            raise _changed() from None
        if len(data) < _NONCE_BYTES + _TAG_BYTES:
            raise _changed()
        aad = (head + context).encode("utf-8", "surrogatepass")
        try:
            return cipher.decrypt(data[:_NONCE_BYTES], data[_NONCE_BYTES:], aad)
        except Exception as exc:
            # Imported here, not at the top: importing this module must not import cryptography.
            from cryptography.exceptions import InvalidTag

            if isinstance(exc, InvalidTag):
                raise _changed() from None
            raise

    def seal(self, values: Mapping[str, Any], *, owner_id: str | None, context: str) -> str:
        """A blob of ``values`` as compact JSON with sorted keys."""
        import json

        try:
            text = json.dumps(dict(values), sort_keys=True, separators=(",", ":"))
        except (TypeError, ValueError):
            raise CredentialError(
                "credentials must be JSON values (strings, numbers, booleans, null, lists and "
                "objects with string keys): convert the others before storing them"
            ) from None
        return self.encrypt(text.encode("utf-8"), owner_id=owner_id, context=context)

    def unseal(self, blob: str, *, owner_id: str | None, context: str) -> dict[str, Any]:
        """The JSON object a blob ``seal`` made holds."""
        import json

        plaintext = self.decrypt(blob, owner_id=owner_id, context=context)
        try:
            values = json.loads(plaintext)
        except ValueError:
            values = None
        if not isinstance(values, dict):
            raise CredentialError(
                "the decrypted credentials are not a JSON object: store the credentials again"
            )
        return values

    def needs_rotation(self, blob: str) -> bool:
        """Whether the blob was not encrypted with the newest key (or is not a blob at all)."""
        return self.blob_key_id(blob) != self.newest.id

    @staticmethod
    def blob_key_id(blob: str) -> str | None:
        """The id of the key a blob names; None when the blob is not in this format."""
        version, _, rest = blob.partition(".")
        found, dot, _ = rest.partition(".")
        return found if version == _VERSION and dot and _is_key_id(found) else None

    def _cipher(self, head: str, owner_id: str | None) -> AESGCM:
        """The cached cipher of one key and owner, derived on first use (slow path of decrypt)."""
        found = self.blob_key_id(head)
        if found is None or len(head) != _HEAD_LENGTH:
            raise _not_a_blob()
        if not self._keys:
            raise _no_key()
        key = self._by_id.get(found)
        if key is None:
            raise CredentialError(
                f"the credential blob was encrypted with key {found}, which is not configured: "
                f"add that key to {ENV_KEYS} (older keys after the newest)"
            )
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        cipher = AESGCM(_owner_key(key.material, owner_id))
        if len(self._ciphers) >= _CACHE_LIMIT:
            self._ciphers.clear()
        self._ciphers[(head, owner_id)] = cipher
        return cipher


def _is_key_id(text: str) -> bool:
    """Whether ``text`` has the shape of a key id (16 lowercase hex characters)."""
    return len(text) == _KEY_ID_CHARS and all(char in "0123456789abcdef" for char in text)


def _file_entries(path: Path) -> list[tuple[str, str]]:
    """The keys of a keys file, each with where it stands (comments and blank lines skipped)."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeError:
        raise CredentialError(
            f"the keys file {path} ({ENV_KEYS_FILE}) is not UTF-8 text: write one key per line"
        ) from None
    except OSError as exc:
        raise CredentialError(
            f"the keys file {path} ({ENV_KEYS_FILE}) cannot be read ({exc.strerror or exc}): "
            f"fix the path or its permissions, or set {ENV_KEYS} instead"
        ) from None
    entries: list[tuple[str, str]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            entries.append((f"key {len(entries) + 1} (line {number}) in {path}", stripped))
    return entries


def _check_strength(where: str, material: bytes, *, newest: bool) -> None:
    """Refuse a too-regular key where it would seal new credentials (the newest); an older one
    only opens what it sealed, which stays readable so `keys rotate` can move it to a good key,
    and is warned about. ``where`` names the key, never its value."""
    reason = _weakness(material)
    if reason is None:
        return
    if newest:
        raise CredentialError(
            f"{where} is too regular to be a secret key ({reason}): {_GENERATE_HINT}; to move "
            f"credentials sealed with it, list the new key first ({ENV_KEYS}=NEW,OLD) and run "
            "`expediter keys rotate`"
        )
    logger.warning(
        "%s is too regular to be a secret key (%s): it only opens credentials sealed with it; "
        "run `expediter keys rotate` to reseal them with the newest key, then remove it",
        where,
        reason,
    )


def _key_material(where: str, text: str) -> bytes:
    """The 32 bytes of one configured key; ``where`` names it in errors, never its value."""
    body = text.rstrip("=")
    material = b""
    if body and len(text) - len(body) <= 2 and set(body) <= _URLSAFE_ALPHABET:
        try:
            material = _decode(body)
        except ValueError:  # a length no base64 text has
            pass
    if len(material) != KEY_BYTES:
        raise CredentialError(
            f"{where} is not URL-safe base64 of {KEY_BYTES} bytes (44 characters, '-' and '_' "
            f"instead of '+' and '/'): {_GENERATE_HINT}"
        )
    if material in _EXAMPLE_MATERIALS:
        raise CredentialError(
            f"{where} is a documented example value, not a secret: {_GENERATE_HINT}"
        )
    return material
