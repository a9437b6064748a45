"""The server's bearer token: where it comes from, whether an address needs one, and the
fastmcp verifier that checks it (in constant time).

The token is never printed, logged or put in an error message; messages name where it came
from (``--token-file PATH``, ``EXPEDITER_SERVE_TOKEN``) instead.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["TOKEN_VARIABLE", "TokenProblem", "is_loopback", "make_verifier", "read_token"]

#: The environment variable that holds the token (below --token-file and --token).
TOKEN_VARIABLE = "EXPEDITER_SERVE_TOKEN"
#: A token file larger than this is not a token.
MAX_TOKEN_BYTES = 4096
#: What a verified request is known as (there is one client identity: the token's holder).
CLIENT_ID = "expediter-serve"


class TokenProblem(ValueError):
    """The token given cannot be used; the message says which option to fix (never the
    token)."""

    def __init__(self, message: str, option: str) -> None:
        super().__init__(message)
        self.option = option


def _checked(token: str, where: str, option: str) -> str:
    if not token:
        raise TokenProblem(f"the token from {where} is empty", option)
    if not all("!" <= char <= "~" for char in token):
        raise TokenProblem(
            f"the token from {where} must be printable ASCII without spaces "
            "(clients send it in an Authorization header)",
            option,
        )
    return token


def read_token(
    token: str | None, token_file: Path | None, environ: Mapping[str, str] | None = None
) -> str | None:
    """The bearer token: ``--token-file``, else ``--token``, else ``EXPEDITER_SERVE_TOKEN``
    (None when none is given). Giving both options is a ``TokenProblem``."""
    if token is not None and token_file is not None:
        raise TokenProblem("give --token or --token-file, not both", "--token")
    if token_file is not None:
        try:
            with token_file.open("rb") as stream:
                data = stream.read(MAX_TOKEN_BYTES + 1)
        except OSError as exc:
            raise TokenProblem(
                f"cannot read {token_file}: {exc.strerror or type(exc).__name__}", "--token-file"
            ) from None
        if len(data) > MAX_TOKEN_BYTES:
            raise TokenProblem(f"{token_file} is too large to hold a token", "--token-file")
        try:
            text = data.decode("ascii")
        except UnicodeDecodeError:
            text = "\x00"  # refused below as not printable ASCII
        return _checked(text.strip(), str(token_file), "--token-file")
    if token is not None:
        return _checked(token, "--token", "--token")
    value = (os.environ if environ is None else environ).get(TOKEN_VARIABLE)
    if value is None or not value.strip():
        return None
    return _checked(value.strip(), TOKEN_VARIABLE, "--token")


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (127.0.0.0/8, ::1) or ``localhost``."""
    name = host.strip().strip("[]").lower().rstrip(".")
    if name == "localhost":
        return True
    try:
        address = ipaddress.ip_address(name.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


def make_verifier(token: str) -> Any:
    """A fastmcp ``TokenVerifier`` that accepts exactly ``token`` (compared in constant
    time); clients send ``Authorization: Bearer TOKEN``."""
    from fastmcp.server.auth import AccessToken, TokenVerifier

    expected = token.encode("ascii")

    class BearerToken(TokenVerifier):
        """Accepts the one token the server was started with."""

        async def verify_token(self, token: str) -> AccessToken | None:
            given = token.encode("utf-8", "surrogatepass")
            if not hmac.compare_digest(given, expected):
                return None
            # The request's identity; the token itself is not kept with it.
            return AccessToken(token="***", client_id=CLIENT_ID, scopes=[])

        def __repr__(self) -> str:
            return "BearerToken(***)"

    return BearerToken()
