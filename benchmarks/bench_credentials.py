"""Decrypting one stored credential blob with the keyring, beside cryptography's raw AES-GCM."""

from __future__ import annotations

import base64
import json
import subprocess
import sys

from measure import Figure, Report, bench_env, parse_args, time_statements

from expediter.core.instances.keys import Keyring, generate_key

OWNER = "alice"
CONTEXT = "inst-1"
#: A typical credential: an OAuth client plus tokens, about 200 bytes of compact JSON.
CREDENTIAL = {
    "client_id": "expediter-bench-client",
    "client_secret": "s3cr3t-" + "x" * 21,
    "access_token": "ya29." + "a" * 30,
    "refresh_token": "1//" + "r" * 40,
}
IMPORT_PROBE = "import sys, expediter.core.instances.keys\nprint('cryptography' in sys.modules)\n"


def owner_key(material: bytes, owner: str) -> bytes:
    """The owner's AES key, derived as the keyring documents it (not through the keyring)."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    info = b"expediter owner key v1\0user:" + owner.encode("utf-8", "surrogatepass")
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=info).derive(material)


def main() -> int:
    """Measure and report."""
    from cryptography import __version__ as cryptography_version
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    args = parse_args(__doc__)
    rounds, batch = (3, 0.005) if args.quick else (21, 0.05)
    keyring = Keyring.parse(generate_key())
    plaintext = json.dumps(CREDENTIAL, sort_keys=True, separators=(",", ":")).encode()
    blob = keyring.encrypt(plaintext, owner_id=OWNER, context=CONTEXT)
    head, _, payload = blob.rpartition(".")
    data = base64.urlsafe_b64decode(payload + "==")
    nonce, sealed = data[:12], data[12:]
    aad = f"{head}.{CONTEXT}".encode()
    derived = owner_key(keyring.newest.material, OWNER)
    cipher = AESGCM(derived)

    report = Report("credentials", args.quick)
    report.settings.update(
        rounds=rounds,
        plaintext_bytes=len(plaintext),
        blob_chars=len(blob),
        cryptography=cryptography_version,
    )
    report.check(
        "the keyring's blob opens with the documented derivation",
        cipher.decrypt(nonce, sealed, aad) == plaintext,
        "HKDF-SHA256 owner key, AAD ex1.<key id>.<context>",
    )
    opened = keyring.decrypt(blob, owner_id=OWNER, context=CONTEXT)
    report.check("keyring.decrypt returns the plaintext", opened == plaintext)
    probe = subprocess.run(
        [sys.executable, "-c", IMPORT_PROBE],
        env=bench_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    lazy = probe.returncode == 0 and probe.stdout.strip() == "False"
    detail = probe.stdout.strip() or probe.stderr.strip()[-200:]
    report.check("importing the keyring module imports no cryptography", lazy, detail)

    namespace = {
        "keyring": keyring,
        "blob": blob,
        "owner": OWNER,
        "context": CONTEXT,
        "AESGCM": AESGCM,
        "derived": derived,
        "cipher": cipher,
        "nonce": nonce,
        "sealed": sealed,
        "aad": aad,
        "payload": payload,
        "b64decode": base64.urlsafe_b64decode,
    }
    cases = {
        "decrypt": ("keyring.decrypt(blob, owner_id=owner, context=context)", namespace),
        "raw": ("AESGCM(derived).decrypt(nonce, sealed, aad)", namespace),
        "raw_prebuilt": ("cipher.decrypt(nonce, sealed, aad)", namespace),
        "raw_base64": (
            "d = b64decode(payload + '=='); cipher.decrypt(d[:12], d[12:], aad)",
            namespace,
        ),
    }
    runs = time_statements(cases, rounds=rounds, batch_seconds=batch)
    size = f"{len(plaintext)}-byte credential JSON"
    report.add(Figure("decrypt", f"keyring.decrypt of one blob ({size})", runs["decrypt"]))
    report.add(Figure("raw", "AESGCM(derived_key).decrypt(nonce, ct, aad)", runs["raw"]))
    report.add(
        Figure("raw_prebuilt", "the same decrypt on an AESGCM built once", runs["raw_prebuilt"])
    )
    report.add(
        Figure(
            "raw_base64",
            "base64.urlsafe_b64decode of the blob's data, then raw_prebuilt",
            runs["raw_base64"],
        )
    )
    # The budget's baseline does the same work with nothing of the keyring's: decode the
    # blob's data, then cryptography's AESGCM.decrypt on a cipher built once (the stricter of
    # the two raw figures; building AESGCM per call is reported for orientation).
    report.ratio("keyring decrypt of one blob", "decrypt", "raw_base64", 1.5)
    report.ratio("keyring decrypt vs AESGCM built per call", "decrypt", "raw")
    report.ratio("keyring decrypt vs a cipher built once", "decrypt", "raw_prebuilt")
    return report.finish(args.results_dir)


if __name__ == "__main__":
    sys.exit(main())
