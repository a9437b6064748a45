"""The credential keyring: AES-256-GCM blobs under per-owner HKDF keys, key rotation, and the
parsing of EXPEDITER_SECRET_KEYS (real cryptography, no mocks)."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from expediter.core.instances.keys import (
    ENV_KEYS,
    ENV_KEYS_FILE,
    EXAMPLE_KEY,
    EXAMPLE_KEYS,
    KEY_BYTES,
    Keyring,
    MasterKey,
    generate_key,
    key_id,
)
from expediter.errors import CredentialError

KEY_A = generate_key()
KEY_B = generate_key()
RING = Keyring.parse(KEY_A)
#: Any text, lone surrogates included (owner ids and contexts are encoded with surrogatepass).
ANY_TEXT = st.text(st.characters() | st.characters(categories=["Cs"]), max_size=40)


def material(key: str) -> bytes:
    """The 32 bytes a key text stands for."""
    return base64.urlsafe_b64decode(key)


def flip(blob: str, index: int) -> str:
    """The blob with one base64 character of its data replaced by another."""
    head, _, payload = blob.rpartition(".")
    replaced = "B" if payload[index] != "B" else "C"
    return f"{head}.{payload[:index]}{replaced}{payload[index + 1 :]}"


def test_bytes_round_trip() -> None:
    blob = RING.encrypt(b"token-123", owner_id="alice", context="inst-1")
    assert RING.decrypt(blob, owner_id="alice", context="inst-1") == b"token-123"


def test_seal_and_unseal_round_trip_a_json_object() -> None:
    values = {"api_key": "k-1", "region": "eu", "retries": 3, "scopes": ["a", "b"]}
    blob = RING.seal(values, owner_id="alice", context="inst-1")
    assert RING.unseal(blob, owner_id="alice", context="inst-1") == values


def test_seal_refuses_values_that_are_not_json_without_echoing_them() -> None:
    with pytest.raises(CredentialError, match="JSON values") as caught:
        RING.seal({"secret": b"raw-bytes-value"}, owner_id=None, context="inst-1")
    assert "raw-bytes-value" not in str(caught.value)


def test_unseal_refuses_a_blob_that_holds_no_json_object() -> None:
    for plaintext in (b"[1, 2]", b"not json at all"):
        blob = RING.encrypt(plaintext, owner_id=None, context="inst-1")
        with pytest.raises(CredentialError, match="not a JSON object") as caught:
            RING.unseal(blob, owner_id=None, context="inst-1")
        assert "json at all" not in str(caught.value)


def test_blob_has_the_documented_format() -> None:
    blob = RING.encrypt(b"x", owner_id=None, context="c")
    version, kid, payload = blob.split(".")
    assert version == "ex1"
    assert kid == RING.newest.id == key_id(material(KEY_A))
    assert "=" not in payload
    data = base64.urlsafe_b64decode(payload + "==")
    assert len(data) == 12 + 1 + 16  # nonce, ciphertext, tag


def test_the_blob_opens_with_the_documented_derivation_and_associated_data() -> None:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    blob = RING.encrypt(b"secret", owner_id="bob", context="inst-9")
    head, _, payload = blob.rpartition(".")
    data = base64.urlsafe_b64decode(payload + "==")
    info = b"expediter owner key v1\0user:bob"
    derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=info).derive(
        material(KEY_A)
    )
    aad = f"{head}.inst-9".encode()
    assert AESGCM(derived).decrypt(data[:12], data[12:], aad) == b"secret"


def test_every_encryption_uses_a_fresh_nonce() -> None:
    blobs = {RING.encrypt(b"same", owner_id="alice", context="inst-1") for _ in range(50)}
    assert len(blobs) == 50
    nonces = {base64.urlsafe_b64decode(b.rpartition(".")[2] + "==")[:12] for b in blobs}
    assert len(nonces) == 50


@pytest.mark.parametrize("index", [0, 5, 16, 20, -3])
def test_a_changed_character_in_the_data_is_refused(index: int) -> None:
    blob = RING.encrypt(b"a credential of some length", owner_id="alice", context="inst-1")
    with pytest.raises(CredentialError, match="it was changed"):
        RING.decrypt(flip(blob, index), owner_id="alice", context="inst-1")


@pytest.mark.parametrize("cut", [1, 4, 10, 30, 1000])
def test_truncated_data_is_refused(cut: int) -> None:
    blob = RING.encrypt(b"a credential", owner_id="alice", context="inst-1")
    with pytest.raises(CredentialError, match="cannot be decrypted"):
        RING.decrypt(blob[: max(len(blob) - cut, 21)], owner_id="alice", context="inst-1")


def test_another_owner_cannot_decrypt() -> None:
    blob = RING.encrypt(b"alice's token", owner_id="alice", context="inst-1")
    with pytest.raises(CredentialError, match="belongs to another owner or instance"):
        RING.decrypt(blob, owner_id="bob", context="inst-1")
    with pytest.raises(CredentialError):
        RING.decrypt(blob, owner_id=None, context="inst-1")


def test_the_shared_owner_and_the_empty_owner_id_have_different_keys() -> None:
    shared = RING.encrypt(b"x", owner_id=None, context="inst-1")
    empty = RING.encrypt(b"x", owner_id="", context="inst-1")
    with pytest.raises(CredentialError):
        RING.decrypt(shared, owner_id="", context="inst-1")
    with pytest.raises(CredentialError):
        RING.decrypt(empty, owner_id=None, context="inst-1")
    assert RING.decrypt(shared, owner_id=None, context="inst-1") == b"x"
    assert RING.decrypt(empty, owner_id="", context="inst-1") == b"x"


def test_a_blob_copied_to_another_context_is_refused() -> None:
    blob = RING.encrypt(b"x", owner_id="alice", context="inst-1")
    with pytest.raises(CredentialError, match="another owner or instance"):
        RING.decrypt(blob, owner_id="alice", context="inst-2")


def test_a_blob_naming_a_key_that_is_not_configured_is_refused_with_its_id() -> None:
    blob = RING.encrypt(b"x", owner_id="alice", context="inst-1")
    other = Keyring.parse(KEY_B)
    with pytest.raises(CredentialError) as caught:
        other.decrypt(blob, owner_id="alice", context="inst-1")
    message = str(caught.value)
    assert RING.newest.id in message
    assert ENV_KEYS in message
    assert "older keys after the newest" in message
    assert KEY_A not in message
    assert KEY_B not in message


@pytest.mark.parametrize(
    "blob", ["", "plain text", "ex2.0123456789abcdef.AAAA", "ex1.not-a-key-id.AAAA", "ex1."]
)
def test_a_value_that_is_no_blob_is_refused(blob: str) -> None:
    assert Keyring.blob_key_id(blob) is None
    with pytest.raises(CredentialError, match="is not an expediter credential blob"):
        RING.decrypt(blob, owner_id=None, context="inst-1")


def test_an_empty_keyring_cannot_encrypt_or_decrypt() -> None:
    blob = RING.encrypt(b"x", owner_id=None, context="inst-1")
    empty = Keyring([])
    for attempt in (
        lambda: empty.encrypt(b"x", owner_id=None, context="inst-1"),
        lambda: empty.decrypt(blob, owner_id=None, context="inst-1"),
        empty.require,
        lambda: empty.newest,
    ):
        with pytest.raises(CredentialError, match="no key is configured") as caught:
            attempt()
        assert ENV_KEYS in str(caught.value)
        assert "`expediter keys generate`" in str(caught.value)


def test_rotation_decrypts_old_blobs_and_encrypts_with_the_newest_key() -> None:
    old_blob = RING.encrypt(b"old", owner_id="alice", context="inst-1")
    rotated = Keyring.parse(f"{KEY_B},{KEY_A}")
    assert rotated.newest.id == key_id(material(KEY_B))
    assert rotated.decrypt(old_blob, owner_id="alice", context="inst-1") == b"old"
    new_blob = rotated.encrypt(b"new", owner_id="alice", context="inst-1")
    assert Keyring.blob_key_id(new_blob) == rotated.newest.id
    assert rotated.needs_rotation(old_blob)
    assert not rotated.needs_rotation(new_blob)
    assert not RING.needs_rotation(old_blob)
    with pytest.raises(CredentialError, match="not configured"):
        RING.decrypt(new_blob, owner_id="alice", context="inst-1")


def test_blobs_of_many_owners_decrypt_after_the_cipher_cache_is_cleared() -> None:
    ring = Keyring.parse(KEY_A)
    blobs = {
        f"user-{n}": ring.encrypt(b"v", owner_id=f"user-{n}", context="c") for n in range(5000)
    }
    for owner, blob in list(blobs.items())[::250]:
        assert ring.decrypt(blob, owner_id=owner, context="c") == b"v"


def test_parse_reads_a_comma_list_with_spaces_newest_first() -> None:
    ring = Keyring.parse(f"  {KEY_B} ,\t{KEY_A}\n, ")
    assert [key.id for key in ring.keys] == [key_id(material(KEY_B)), key_id(material(KEY_A))]
    assert ring.keys[0].material == material(KEY_B)


def test_parse_accepts_keys_without_padding_and_drops_duplicates() -> None:
    ring = Keyring.parse(f"{KEY_A.rstrip('=')},{KEY_B},{KEY_A}")
    assert [key.material for key in ring.keys] == [material(KEY_A), material(KEY_B)]


def test_parse_reads_a_keys_file_with_comments_and_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "keys"
    path.write_text(f"# newest first\n\n  {KEY_B}  \n# retired soon\n{KEY_A}\n", encoding="utf-8")
    for source in (path, str(path)):
        ring = Keyring.parse(None, source)
        assert [key.material for key in ring.keys] == [material(KEY_B), material(KEY_A)]
    assert Keyring.parse("  ", path).keys == ring.keys


def test_the_environment_text_wins_over_the_keys_file(tmp_path: Path) -> None:
    path = tmp_path / "keys"
    path.write_text(KEY_B + "\n", encoding="utf-8")
    assert [key.material for key in Keyring.parse(KEY_A, path).keys] == [material(KEY_A)]


def test_parse_without_keys_gives_an_empty_keyring(tmp_path: Path) -> None:
    empty_file = tmp_path / "keys"
    empty_file.write_text("# nothing yet\n\n", encoding="utf-8")
    for ring in (
        Keyring.parse(None),
        Keyring.parse(""),
        Keyring.parse(" , "),
        Keyring.parse(None, empty_file),
    ):
        assert ring.keys == ()
        with pytest.raises(CredentialError, match=ENV_KEYS):
            ring.require()


@pytest.mark.parametrize(
    "bad",
    [
        "not-base64!!",
        base64.urlsafe_b64encode(b"sixteen-byte-key").decode(),
        base64.urlsafe_b64encode(b"k" * 33).decode(),
        base64.b64encode(b"\xfb" * 32).decode(),  # standard alphabet: '+' and '/'
        KEY_A[:-2],
        KEY_A + "===",
        "é" * 43,
    ],
)
def test_a_malformed_key_is_named_by_position_never_by_value(bad: str) -> None:
    with pytest.raises(CredentialError) as caught:
        Keyring.parse(f"{KEY_A}, {bad}")
    message = str(caught.value)
    assert "key 2 in EXPEDITER_SECRET_KEYS" in message
    assert "32 bytes" in message
    assert bad not in message
    assert KEY_A not in message


def test_a_malformed_key_in_the_file_is_named_by_path_and_line(tmp_path: Path) -> None:
    path = tmp_path / "keys"
    path.write_text(f"# comment\n{KEY_A}\n\nsecret-but-broken\n", encoding="utf-8")
    with pytest.raises(CredentialError) as caught:
        Keyring.parse(None, path)
    message = str(caught.value)
    assert "key 2 (line 4)" in message
    assert str(path) in message
    assert "secret-but-broken" not in message


@pytest.mark.parametrize("example", sorted(EXAMPLE_KEYS))
def test_documented_example_keys_are_refused(example: str) -> None:
    for text in (example, example.rstrip("="), f"{KEY_A},{example}"):
        with pytest.raises(CredentialError, match="documented example value") as caught:
            Keyring.parse(text)
        assert ENV_KEYS in str(caught.value)
        assert "`expediter keys generate`" in str(caught.value)


def test_the_example_key_is_the_documented_one_and_the_zero_key_is_refused() -> None:
    assert material(EXAMPLE_KEY) == b"expediter-example-key-do-not-use"
    zero = base64.urlsafe_b64encode(bytes(KEY_BYTES)).decode()
    with pytest.raises(CredentialError, match="documented example value"):
        Keyring.parse(zero)


def test_an_example_key_in_the_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "keys"
    path.write_text(EXAMPLE_KEY + "\n", encoding="utf-8")
    with pytest.raises(CredentialError, match=f"documented example value.*{ENV_KEYS}"):
        Keyring.parse(None, path)


def key_text(data: bytes) -> str:
    """``data`` written as a configured key (URL-safe base64 with padding)."""
    return base64.urlsafe_b64encode(data).decode()


#: 24 random-looking bytes: the start of keys that are weak only at their end.
RANDOM_24 = "8f3a61d20be94c7755a1f0c3e6192b84d7e05b9a36c8f412"
#: Byte strings of the right length that no random source would give.
WEAK = {
    "all zeros": bytes(KEY_BYTES),
    "31 zeros and a 1": bytes(KEY_BYTES - 1) + b"\x01",
    "one value": b"\xa7" * KEY_BYTES,
    "a repeated pattern": b"\x13\x37\xc0\xde" * 8,
    "16 random-looking bytes twice": bytes.fromhex("8f3a61d20be94c7755a1f0c3e6192b84") * 2,
    "a counter": bytes(range(KEY_BYTES)),
    "interleaved counters": bytes(b for i in range(16) for b in (i, 0x80 + i)),
    "random-looking bytes then 8 zeros": bytes.fromhex(RANDOM_24) + bytes(8),
    "random-looking bytes then a count of 8": bytes.fromhex(RANDOM_24) + bytes(range(9, 17)),
    "ASCII text": b"my-production-secret-key-2024!!!",
    "a passphrase": b"Correct horse\tbattery staple #9\n",
}


@pytest.mark.parametrize("data", WEAK.values(), ids=WEAK.keys())
def test_a_low_entropy_key_is_refused_with_how_to_generate_one(data: bytes) -> None:
    assert len(data) == KEY_BYTES
    text = key_text(data)
    for keys in (text, text.rstrip("="), f"{text},{KEY_A}"):
        with pytest.raises(CredentialError, match="key 1 in EXPEDITER_SECRET_KEYS") as caught:
            Keyring.parse(keys)
        message = str(caught.value)
        assert "`expediter keys generate`" in message
        assert text not in message
        assert text.rstrip("=") not in message
        assert data.hex() not in message


def test_a_low_entropy_key_in_the_file_is_named_by_path_and_line(tmp_path: Path) -> None:
    path = tmp_path / "keys"
    path.write_text(f"# newest first\n{key_text(WEAK['31 zeros and a 1'])}\n", encoding="utf-8")
    with pytest.raises(CredentialError, match="too regular") as caught:
        Keyring.parse(None, path)
    assert "key 1 (line 2)" in str(caught.value)
    assert str(path) in str(caught.value)


def test_an_older_low_entropy_key_still_opens_its_blobs_so_rotation_can_replace_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Credentials sealed before weak keys were refused must stay readable until
    # `keys rotate` reseals them with a new key listed first.
    weak = MasterKey.from_material(WEAK["31 zeros and a 1"])
    blob = Keyring([weak]).seal({"api_key": "k-1"}, owner_id="ann", context="inst-1")
    with caplog.at_level("WARNING", logger="expediter.core.instances.keys"):
        ring = Keyring.parse(f"{KEY_A},{key_text(weak.material)}")
    assert [key.id for key in ring.keys] == [key_id(material(KEY_A)), weak.id]
    assert ring.unseal(blob, owner_id="ann", context="inst-1") == {"api_key": "k-1"}
    assert ring.needs_rotation(blob)
    assert Keyring.blob_key_id(ring.seal({}, owner_id="ann", context="c")) == ring.newest.id
    (warning,) = [record for record in caplog.records if record.levelname == "WARNING"]
    assert "key 2 in EXPEDITER_SECRET_KEYS" in warning.getMessage()
    assert "`expediter keys rotate`" in warning.getMessage()
    assert key_text(weak.material).rstrip("=") not in warning.getMessage()


def test_random_and_generated_keys_are_never_refused() -> None:
    for _ in range(3000):
        for key in (generate_key(), key_text(os.urandom(KEY_BYTES))):
            assert len(Keyring.parse(key).keys) == 1


def test_a_random_key_is_refused_with_a_probability_below_2_to_the_minus_40() -> None:
    # The exact odds of each test of a 32-byte uniformly random key, recomputed from the
    # thresholds keys.py uses, so the comment there cannot drift from the code.
    from fractions import Fraction
    from math import perm

    from expediter.core.instances import keys

    def at_most_distinct(draws: int, distinct: int) -> Fraction:
        """P(at most ``distinct`` values among ``draws`` uniform bytes): S(draws, k) ways to
        split the draws into k groups, 256!/(256-k)! ways to give the groups values."""
        stirling = [1] + [0] * draws  # S(n, k) for k = 0..draws, built up from n = 0
        for _ in range(draws):
            stirling = [0] + [k * stirling[k] + stirling[k - 1] for k in range(1, draws + 1)]
        ways = sum(stirling[k] * perm(256, k) for k in range(1, distinct + 1))
        return Fraction(ways, 256**draws)

    assert at_most_distinct(3, 1) == Fraction(256, 256**3)  # the same byte three times
    few_values = at_most_distinct(KEY_BYTES, keys._MIN_DISTINCT - 1)
    few_steps = at_most_distinct(KEY_BYTES - 1, keys._MIN_DISTINCT - 1)
    # _MAX_RUN bytes stepping by one amount: _MAX_RUN - 1 equal steps, in any of the windows
    # of that many among the key's steps (union bound).
    windows = (KEY_BYTES - 1) - (keys._MAX_RUN - 1) + 1
    one_step = windows * Fraction(1, 256 ** (keys._MAX_RUN - 2))
    text = Fraction(len(keys._TEXT_BYTES), 256) ** KEY_BYTES
    assert len(keys._TEXT_BYTES) == 100
    assert few_values + few_steps + one_step + text < Fraction(1, 2**42)


def test_an_unreadable_keys_file_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-file"
    with pytest.raises(CredentialError) as caught:
        Keyring.parse(None, missing)
    assert str(missing) in str(caught.value)
    assert ENV_KEYS_FILE in str(caught.value)
    binary = tmp_path / "binary"
    binary.write_bytes(b"\xff\xfe secret bytes")
    with pytest.raises(CredentialError, match="not UTF-8") as caught:
        Keyring.parse(None, binary)
    assert str(binary) in str(caught.value)
    assert "secret" not in str(caught.value)


def test_generate_key_gives_distinct_url_safe_keys_of_32_bytes() -> None:
    keys = {generate_key() for _ in range(20)}
    assert len(keys) == 20
    for key in keys:
        assert len(key) == 44
        assert set(key) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_=")
        assert len(base64.urlsafe_b64decode(key)) == KEY_BYTES
        assert Keyring.parse(key).newest.material == material(key)


def test_key_id_is_stable_and_differs_per_key() -> None:
    assert key_id(material(KEY_A)) == key_id(material(KEY_A))
    assert key_id(material(KEY_A)) != key_id(material(KEY_B))
    assert len(key_id(material(KEY_A))) == 16
    assert MasterKey.from_material(material(KEY_A)).id == key_id(material(KEY_A))


def test_reprs_show_key_ids_and_no_key_material() -> None:
    ring = Keyring.parse(f"{KEY_A},{KEY_B}")
    for shown in (repr(ring), repr(ring.keys), repr(ring.newest), str(ring.newest)):
        for key in (KEY_A, KEY_B):
            assert key not in shown
            assert key.rstrip("=") not in shown
            assert repr(material(key)) not in shown
            assert material(key).hex() not in shown
    assert ring.newest.id in repr(ring)


def test_importing_the_module_does_not_import_cryptography() -> None:
    code = "import sys, expediter.core.instances.keys\nprint('cryptography' in sys.modules)"
    env = {k: v for k, v in os.environ.items() if not k.startswith("EXPEDITER_")}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert done.stdout.strip() == "False"


@settings(max_examples=150, deadline=None)
@given(
    plaintext=st.binary(max_size=2048),
    owner_id=st.none() | ANY_TEXT,
    context=ANY_TEXT,
)
def test_any_bytes_round_trip_for_any_owner_and_context(
    plaintext: bytes, owner_id: str | None, context: str
) -> None:
    blob = RING.encrypt(plaintext, owner_id=owner_id, context=context)
    assert RING.decrypt(blob, owner_id=owner_id, context=context) == plaintext
    assert Keyring.blob_key_id(blob) == RING.newest.id


@settings(max_examples=100, deadline=None)
@given(
    values=st.dictionaries(
        ANY_TEXT,
        st.none() | st.booleans() | st.integers() | ANY_TEXT,
        max_size=8,
    ),
    owner_id=st.none() | ANY_TEXT,
)
def test_any_json_object_seals_and_unseals(values: dict[str, object], owner_id: str | None) -> None:
    blob = RING.seal(values, owner_id=owner_id, context="inst-1")
    assert RING.unseal(blob, owner_id=owner_id, context="inst-1") == values
