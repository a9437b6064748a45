"""OpenAPI import: an OpenAPI 3.0/3.1 or Swagger 2.0 document as an ``http`` configuration.

``load_document`` reads a document (JSON or YAML); ``import_spec`` turns it into an
``ImportedSpec``: the base URL, one ``HttpAction`` per operation, the security schemes the
``http`` tool supports, and every construct it could not import (``problems``), so nothing is
dropped silently. Local ``$ref``s are inlined into the schemas the model sees; the import never
fetches a reference and never writes a secret (``fetching`` fetches the document itself, when
the operator gives its URL, through the egress guard).

Binary values travel as base64 text the model writes: raw bytes (3.0 ``format: binary``, 3.1
``contentMediaType`` without ``contentEncoding``, 2.0 ``type: file``, a binary media type) become
``{"type": "string", "format": "binary", "contentEncoding": "base64"}``, which the tool sends
decoded; a value the API itself wants as base64 text (3.0 ``format: byte``) keeps its format.

The modules, one stage each: ``document`` (reading), ``schemas`` (references and schemas),
``security`` (schemes), ``operations`` (actions), ``records`` (what an import returns),
``fetching`` (a document from an http(s) URL).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from expediter_http.openapi.document import document_version, kind, load_document, plain_data
from expediter_http.openapi.operations import Importer
from expediter_http.openapi.records import ImportedSpec, SecurityScheme

__all__ = ["ImportedSpec", "SecurityScheme", "import_spec", "load_document"]


def import_spec(
    document: Mapping[str, Any], *, base_url: str | None = None, document_url: str | None = None
) -> ImportedSpec:
    """Import an OpenAPI 3.0/3.1 or Swagger 2.0 document (``base_url`` replaces its servers';
    a relative server is under ``document_url``, the URL the document was fetched from);
    ValueError for another version or a document that is not an object."""
    try:
        plain = plain_data(document)
        if not isinstance(plain, Mapping):
            raise ValueError(
                f"an OpenAPI document is an object (a mapping), not {kind(document)}; check "
                "that it is the document itself"
            )
        return Importer(plain, document_version(plain)).run(base_url, document_url)
    except (RecursionError, MemoryError):
        raise ValueError(
            "the document nests too deeply or is too large to import; check that it is an "
            "OpenAPI document"
        ) from None
