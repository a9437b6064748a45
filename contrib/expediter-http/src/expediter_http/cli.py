"""``expediter http ...``: import an OpenAPI document as a stored ``http`` instance, and list the
actions of one.

``expediter http import SPEC --name N`` reads the document (a file, standard input, or an
http(s) URL fetched through the egress guard, which ``--allow-network`` ranges also open),
prints what it could not import on standard error (``warning: ...``: among them a security
scheme or header parameter naming a header the request frames itself, ``Host``, ``Cookie``
..., which is left out), warns when the egress guard would refuse the base URL, and stores the
instance as the operator: ``--allow-network`` ranges are allowed here. Secret values
(``--secret SCHEME=...``) are sealed with the owner's key and never printed.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import click

from expediter.cli.app import CliState, pass_state

# The parsing `instances add` uses: `--secret FIELD=VALUE|FIELD=-|FIELD=@PATH` (one reading of
# standard input, values never echoed) and `--allow-network CIDR`.
from expediter.cli.instances import (
    allow_network_option,
    network_options,
    secret_options,
    store_instance,
    warn_refused_url,
)
from expediter.cli.output import echo_json, echo_table, escape, warn

if TYPE_CHECKING:
    from expediter_http.openapi import ImportedSpec

__all__ = ["http"]

_SECRET_HELP = (
    "The secret of a security scheme the document declares: SCHEME=VALUE (an API key or token; "
    "'user:password' for basic), SCHEME=- reads it from standard input, SCHEME=@PATH from a "
    "file. Repeatable."
)


@click.group()
def http() -> None:
    """Import OpenAPI documents as http tool instances and list their actions."""


def _base_url(value: str | None) -> str | None:
    if value is None:
        return None
    parts = urlsplit(value)
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        raise click.BadParameter(
            f"{escape(value)} is not an http or https URL (e.g. https://api.example.com/v1)",
            param_hint="--base-url",
        )
    return value


def _read_spec(
    source: str, base_url: str | None, networks: Sequence[str], state: CliState
) -> ImportedSpec:
    from expediter.errors import EgressBlocked
    from expediter_http.openapi import import_spec, load_document
    from expediter_http.openapi.fetching import fetch_document, is_url

    document_url = None
    try:
        if source == "-":
            from expediter_http.openapi.document import MAX_DOCUMENT_BYTES

            # Text, never a path; one character more than the limit lets it say "too large".
            document = load_document(sys.stdin.read(MAX_DOCUMENT_BYTES + 1) + "\n")
        elif is_url(source):
            document_url = source
            allowed = [*networks, *state.config.egress_allow]
            document = load_document(fetch_document(source, allowed))
        else:
            document = load_document(Path(source))
        return import_spec(document, base_url=base_url, document_url=document_url)
    except EgressBlocked as exc:
        raise click.BadParameter(
            escape(f"the egress guard refused to fetch the document: {exc.detail}"),
            param_hint="SPEC",
        ) from None
    except ValueError as exc:
        raise click.BadParameter(escape(" ".join(str(exc).split())), param_hint="SPEC") from None


def _credentials(options: tuple[str, ...], spec: ImportedSpec) -> dict[str, str]:
    known = [scheme.name for scheme in spec.security_schemes]
    for option in options:
        scheme, equals, _ = option.partition("=")
        if equals and scheme and scheme not in known:
            listed = ", ".join(known) if known else "none: it declares no supported scheme"
            raise click.BadParameter(
                f"the document has no security scheme {escape(repr(scheme))} the http tool "
                f"can use (its schemes: {escape(listed)}; a warning above says why a declared "
                "one was left out)",
                param_hint="--secret",
            )
    return secret_options(options)


@http.command("import")
@click.argument("spec", metavar="SPEC")
@click.option("--name", required=True, help="The instance's display name (unique per owner).")
@click.option(
    "--base-url",
    default=None,
    metavar="URL",
    help="The API's base URL (default: the document's first server).",
)
@allow_network_option
@click.option("--secret", "secrets", multiple=True, metavar="SCHEME=VALUE", help=_SECRET_HELP)
@click.option("--user", "user_id", default=None, help="The owner (default: shared by everyone).")
@click.option("--json", "as_json", is_flag=True, help="Print the new record as JSON.")
@pass_state
def import_command(
    state: CliState,
    spec: str,
    name: str,
    base_url: str | None,
    allow_networks: tuple[str, ...],
    secrets: tuple[str, ...],
    user_id: str | None,
    as_json: bool,
) -> None:
    """Store the OpenAPI document SPEC (a JSON or YAML file, - for standard input, or an
    http(s) URL) as an http instance and print its id."""

    given_url = _base_url(base_url)
    networks = network_options(allow_networks)
    if spec == "-" and any(option.partition("=")[2] == "-" for option in secrets):
        raise click.UsageError(
            "SPEC and a --secret both read standard input; read the secret from a file "
            "(SCHEME=@PATH)"
        )
    imported = _read_spec(spec, given_url, networks, state)
    for problem in imported.problems:
        warn(problem)
    if not imported.actions:
        raise click.BadParameter("the document has no operation to import", param_hint="SPEC")
    found = urlsplit(imported.base_url or "")
    if found.scheme.lower() not in ("http", "https") or not found.netloc:
        raise click.UsageError(
            "the document names no absolute http(s) server URL; give the API's URL with --base-url"
        )
    config: dict[str, Any] = imported.config()
    if networks:
        config["allow_networks"] = networks
    credentials = _credentials(secrets, imported)
    if credentials:
        config["credentials"] = credentials
    record = store_instance(
        state, "http", pack="expediter-http", name=name, config=config, user_id=user_id
    )
    warn_refused_url(state, str(imported.base_url), networks, what="the base URL")
    if as_json:
        data = record.to_dict()
        data["action_names"] = [action.name for action in imported.actions]
        data["problems"] = list(imported.problems)
        echo_json(data)
    else:
        click.echo(record.id)


@http.command("actions")
@click.argument("instance_id", metavar="ID")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@pass_state
def actions_command(state: CliState, instance_id: str, as_json: bool) -> None:
    """List the actions of the http instance ID (name, method, path)."""
    from expediter.errors import ConfigError
    from expediter_http.actions import load_actions

    record = state.host().instances.get(instance_id)
    if record.tool != "http":
        raise click.UsageError(
            f"instance {escape(instance_id)} is a {escape(repr(record.tool))} instance, not an "
            "http one"
        )
    try:
        actions = load_actions(record.config.get("actions"))
    except ConfigError as exc:
        raise click.ClickException(
            f"the stored actions are invalid: {escape(str(exc))}; fix them with "
            "`expediter instances set ID --config ...`"
        ) from None
    rows = [[action.name, action.method, action.path or "/"] for action in actions.values()]
    if as_json:
        echo_json([dict(zip(("name", "method", "path"), row, strict=True)) for row in rows])
    else:
        echo_table(["NAME", "METHOD", "PATH"], rows)
