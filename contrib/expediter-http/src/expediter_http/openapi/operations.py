"""Operations: each OpenAPI operation as one ``HttpAction`` (name, parameters, body, security).

Parameters keep their real schemas (integers stay integers, arrays keep ``items``, optional
ones are offered but not required); path-level parameters apply unless the operation declares
one with the same name and location. Swagger 2.0's ``in: body`` and ``in: formData`` become a
request body (multipart when a ``type: file`` is among them). A header parameter OpenAPI says
to ignore (``Accept``, ``Content-Type``, ``Authorization``) or one naming a header the request
frames itself (``Host``, ``Connection`` ...) is reported and left out.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urljoin, urlsplit, urlunsplit

from expediter.core.records.text import echo, truncate
from expediter.core.turns.naming import sanitize
from expediter_http.actions import BodySpec, HttpAction, ParameterSpec, argument_name
from expediter_http.openapi.records import ImportedSpec
from expediter_http.openapi.schemas import BINARY, References
from expediter_http.openapi.security import Schemes
from expediter_http.request import FORBIDDEN_HEADERS, IGNORED_HEADERS

__all__ = ["DESCRIPTION_LIMIT", "METHODS", "Importer"]

#: The operations of a path item, in the order OpenAPI lists them.
METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
#: Characters of an action's or a parameter's description.
DESCRIPTION_LIMIT = 1024

_NAME_LIMIT = 64
# Swagger 2.0 parameter fields that make up the parameter's schema.
_V2_SCHEMA_FIELDS = (
    *("type", "format", "items", "default", "enum", "multipleOf", "x-nullable"),
    *("maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum"),
    *("maxLength", "minLength", "pattern", "maxItems", "minItems", "uniqueItems"),
)
_V2_STYLES: dict[str, tuple[str, bool]] = {
    "csv": ("form", False),
    "ssv": ("spaceDelimited", False),
    "pipes": ("pipeDelimited", False),
    "multi": ("form", True),
}
# Operations of OpenAPI 3.2 this import does not read.
_OTHER_OPERATIONS = frozenset({"query", "additionalOperations"})
_ENCODING_KEYS = ("contentType", "style", "explode", "allowReserved")


def _where(method: str, path: str, operation_id: Any = None) -> str:
    where = f"{method.upper()} {truncate(path, 120, '…')}"
    if isinstance(operation_id, str) and operation_id:
        where += f" ({truncate(operation_id, 80, '…')})"
    return where


def _text(*parts: Any, limit: int = DESCRIPTION_LIMIT) -> str:
    text = "\n\n".join(part.strip() for part in parts if isinstance(part, str) and part.strip())
    return truncate(text, limit, "…")


def _fit(name: str) -> str:
    """A name cut to 64 characters, kept apart from other cut names by a hash of the whole."""
    if len(name) <= _NAME_LIMIT:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[: _NAME_LIMIT - 9]}_{digest}"


def _unique(name: str, taken: set[str]) -> str:
    candidate, number = name, 2
    while candidate in taken:
        suffix = f"_{number}"
        candidate = name[: _NAME_LIMIT - len(suffix)] + suffix
        number += 1
    taken.add(candidate)
    return candidate


def _media_base(media: str) -> str:
    return media.split(";", 1)[0].strip().lower()


def _rank(base: str) -> int:
    """How much the import prefers sending a body as media type ``base`` (0: most)."""
    if base == "application/json" or base.endswith("+json"):
        return 0
    order = ("application/x-www-form-urlencoded", "multipart/form-data")
    if base in order:
        return 1 + order.index(base)
    if _is_xml(base):
        return 3
    return {"text/plain": 4, "application/octet-stream": 5}.get(base, 6)


def _choose_media(types: list[str]) -> str | None:
    """The media type a body is sent as: the most preferred, the first among equals."""
    return min(types, key=lambda media: _rank(_media_base(media))) if types else None


def _is_xml(base: str) -> bool:
    return base in ("application/xml", "text/xml") or base.endswith("+xml")


def _is_binary_media(base: str) -> bool:
    return not (
        base.startswith(("text/", "multipart/"))
        or base in ("application/json", "application/x-www-form-urlencoded")
        or base.endswith(("+json", "+xml"))
        or _is_xml(base)
    )


class Importer:
    """One import: the document, its version and the problems found so far."""

    def __init__(self, document: Mapping[str, Any], version: str) -> None:
        self.doc = document
        self.version = version
        self.v2 = version == "2.0"
        self.problems: list[str] = []
        self._seen: set[str] = set()
        self.refs = References(document, self.report)
        #: Where the document was fetched from (relative servers are under it), or None.
        self.document_url: str | None = None

    def report(self, message: str) -> None:
        """Record a problem (once)."""
        if message not in self._seen:
            self._seen.add(message)
            self.problems.append(message)

    # -- the document -------------------------------------------------------------------------

    def run(self, base_url: str | None, document_url: str | None = None) -> ImportedSpec:
        """The imported specification (``base_url``: the operator's, replacing the servers;
        ``document_url``: where the document came from, which relative servers are under)."""
        info = self.doc.get("info")
        title = info.get("title") if isinstance(info, Mapping) else None
        self.document_url = document_url
        resolved = self.base_url(base_url)
        self.schemes = Schemes(self.doc, self.refs, self.report, swagger=self.v2)
        if self.version == "3.1" and self.doc.get("webhooks"):
            webhooks = self.doc["webhooks"]
            count = len(webhooks) if isinstance(webhooks, Mapping) else 1
            self.report(
                f"{count} webhook(s) not imported: they are requests the API sends, not "
                "operations to call"
            )
        actions = self.operations()
        if not actions:
            self.report("the document has no operations to import")
        return ImportedSpec(
            base_url=resolved,
            actions=tuple(actions),
            security_schemes=self.schemes.names(),
            problems=tuple(self.problems),
            title=title.strip() or None if isinstance(title, str) else None,
        )

    def base_url(self, given: str | None) -> str | None:
        """The base URL: the given one, else the document's first server (or host)."""
        if given:
            return given.rstrip("/") or given
        if self.v2:
            return self._v2_base_url()
        servers = self.doc.get("servers")
        if servers in (None, []) and self.document_url:
            servers = [{"url": "/"}]  # OpenAPI's default server: where the document is
        server = servers[0] if isinstance(servers, list) and servers else None
        if not isinstance(server, Mapping) or not isinstance(server.get("url"), str):
            self.report("the document names no server; give the base URL (--base-url)")
            return None
        url = server["url"]
        variables = server.get("variables")
        if not isinstance(variables, Mapping):
            variables = {}
        for name in re.findall(r"{([^{}]*)}", url):
            variable = variables.get(name)
            default = variable.get("default") if isinstance(variable, Mapping) else None
            if default is None:
                self.report(
                    f"the server URL variable {echo(name, 60)} has no default; give the base "
                    "URL (--base-url)"
                )
                return None
            url = url.replace("{" + name + "}", str(default))
        return self._checked_url(url.rstrip("/") or url)

    def _v2_base_url(self) -> str | None:
        host = self.doc.get("host")
        base_path = self.doc.get("basePath")
        if not isinstance(base_path, str):
            base_path = ""
        fetched = urlsplit(self.document_url or "")
        if (not isinstance(host, str) or not host) and fetched.netloc:
            host = fetched.netloc.rpartition("@")[2]  # Swagger 2.0: the host serving it
        if not isinstance(host, str) or not host:
            self.report("the document names no host; give the base URL (--base-url)")
            return base_path.rstrip("/") or None
        schemes = self.doc.get("schemes")
        listed = [s for s in schemes if isinstance(s, str)] if isinstance(schemes, list) else []
        if not listed and fetched.scheme:
            listed = [fetched.scheme.lower()]
        scheme = "https" if "https" in listed or not listed else listed[0]
        return self._checked_url(f"{scheme}://{host}{base_path}".rstrip("/"))

    def _checked_url(self, url: str) -> str:
        parts = urlsplit(url)
        if not parts.scheme and self.document_url:
            # Relative to where the document was fetched from (OpenAPI 3's rule).
            joined = urljoin(self.document_url, url)
            parts = urlsplit(joined)
            joined = urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, "", ""))
            return joined.rstrip("/") or joined
        if not parts.scheme:
            self.report(
                f"the server URL {echo(url, 120)} is relative; give the absolute base URL "
                "(--base-url)"
            )
        elif parts.scheme.lower() not in ("http", "https"):
            self.report(f"the server URL {echo(url, 120)} is not http or https; give --base-url")
        return url

    def operations(self) -> list[HttpAction]:
        """One action per operation, named uniquely, in the document's order."""
        paths = self.doc.get("paths")
        if paths is not None and not isinstance(paths, Mapping):
            self.report("paths is not an object; no operation imported")
            return []
        actions: list[HttpAction] = []
        taken: set[str] = set()
        for path, raw_item in (paths or {}).items():
            if not path.startswith("/"):
                self.report(f"the path {echo(path, 120)} does not start with '/'; not imported")
                continue
            item = self.refs.deref(raw_item, f"path {truncate(path, 120, '…')}")
            if not isinstance(item, Mapping):
                self.report(f"path {echo(path, 120)} is not imported")
                continue
            if "servers" in item and not self.v2:
                self.report(
                    f"path {echo(path, 120)} names its own servers; they are ignored (the "
                    "instance has one base URL)"
                )
            for method, operation in item.items():
                if method in _OTHER_OPERATIONS or (
                    method.lower() in METHODS and method not in METHODS
                ):
                    self.report(
                        f"path {echo(path, 120)}: {echo(method, 40)} operations are not imported "
                        f"(the methods read are {', '.join(METHODS)})"
                    )
                if method not in METHODS or not isinstance(operation, Mapping):
                    continue
                action = self.operation(path, method, item, operation, taken)
                if action is not None:
                    actions.append(action)
        return actions

    def operation(
        self,
        path: str,
        method: str,
        item: Mapping[str, Any],
        operation: Mapping[str, Any],
        taken: set[str],
    ) -> HttpAction | None:
        """The action of one operation; None (reported) when it cannot be imported."""
        operation_id = operation.get("operationId")
        where = _where(method, path, operation_id)
        for key, what in (("callbacks", "callbacks"), ("servers", "its own servers")):
            if operation.get(key) and not self.v2:
                self.report(f"{where}: {what} are ignored")
        responses = operation.get("responses")
        for response in responses.values() if isinstance(responses, Mapping) else ():
            if isinstance(response, Mapping) and "$ref" in response:
                response = self.refs.lookup(response["$ref"], where, quiet=True)
            if isinstance(response, Mapping) and response.get("links"):
                self.report(f"{where}: response links are ignored")
        parameters = self.parameters(item.get("parameters"), operation.get("parameters"), where)
        specs, body_parameter, form = self.split(parameters, where)
        specs = self.path_parameters(path, specs, where)
        arguments = {spec.argument for spec in specs}
        body: BodySpec | None = None
        if body_parameter is not None:
            body = self.v2_body(body_parameter, operation, where, arguments)
        elif form:
            body = self.v2_form(form, operation, where, arguments)
        elif not self.v2 and "requestBody" in operation:
            request_body = self.refs.deref(operation["requestBody"], where)
            if not isinstance(request_body, Mapping):
                self.report(f"{where}: the request body cannot be read; operation not imported")
                return None
            body = self.body(request_body, where, arguments)
        name = self.name(operation_id, method, path, where, taken)
        description = _text(operation.get("summary"), operation.get("description"))
        if operation.get("deprecated") is True:
            description = f"Deprecated. {description}".strip()
        return HttpAction(
            name=name,
            method=method.upper(),
            path=path,
            description=truncate(description, DESCRIPTION_LIMIT, "…"),
            parameters=tuple(specs),
            body=body,
            security=self.schemes.of(operation, where),
        )

    def name(self, operation_id: Any, method: str, path: str, where: str, taken: set[str]) -> str:
        """A valid action name, unique in ``taken``, from the operationId or method and path."""
        given = isinstance(operation_id, str) and operation_id.strip() != ""
        if given:
            base = operation_id
        else:
            if operation_id is not None:
                self.report(f"{where}: operationId {echo(operation_id, 60)} is not a string")
            base = "_".join([method, *re.findall(r"[A-Za-z0-9]+", path)])
        fitted = _fit(sanitize(base))
        name = _unique(fitted, taken)
        if given and fitted != operation_id:
            self.report(f"{where}: operationId is not a valid action name; named {name!r}")
        elif given and name != fitted:
            self.report(f"{where}: operationId is used by another operation; named {name!r}")
        return name

    # -- parameters -----------------------------------------------------------------------------

    def parameters(
        self, path_level: Any, operation_level: Any, where: str
    ) -> list[Mapping[str, Any]]:
        """The parameters of an operation, its own replacing the path's by name and location."""
        merged: dict[tuple[str, str], Mapping[str, Any]] = {}
        for listed in (path_level, operation_level):
            if listed is None:
                continue
            if not isinstance(listed, list):
                self.report(f"{where}: parameters is not a list; ignored")
                continue
            for raw in listed:
                parameter = self.refs.deref(raw, where)
                if parameter is None and isinstance(raw, Mapping):
                    self.report(f"{where}: the parameter {echo(raw.get('$ref'), 120)} is skipped")
                    continue
                name = parameter.get("name") if isinstance(parameter, Mapping) else None
                location = parameter.get("in") if isinstance(parameter, Mapping) else None
                if not isinstance(name, str) or not isinstance(location, str):
                    self.report(f"{where}: a parameter without a name or 'in' is skipped")
                    continue
                merged[(name, location)] = parameter
        return list(merged.values())

    def split(
        self, parameters: list[Mapping[str, Any]], where: str
    ) -> tuple[list[ParameterSpec], Mapping[str, Any] | None, list[Mapping[str, Any]]]:
        """The path, query, header and cookie parameters; and Swagger 2.0's body and form ones."""
        specs: list[ParameterSpec] = []
        taken: set[str] = set()
        body: Mapping[str, Any] | None = None
        form: list[Mapping[str, Any]] = []
        for parameter in parameters:
            name, location = parameter["name"], parameter["in"]
            label = f"{where}: parameter {echo(name, 60)}"
            if self.v2 and location == "body":
                body = parameter
            elif self.v2 and location == "formData":
                form.append(parameter)
            elif location not in ("path", "query", "header", "cookie"):
                self.report(f"{label} is in {echo(location, 30)}, which is not supported; skipped")
            elif location == "header" and name.lower() in IGNORED_HEADERS:
                self.report(f"{label}: a {name} header parameter is ignored (as OpenAPI says)")
            elif location == "header" and name.lower() in FORBIDDEN_HEADERS:
                self.report(
                    f"{label} names a header the request frames or routes itself, which the "
                    "http tool never sends; skipped"
                )
            else:
                specs.append(self.parameter(parameter, label, taken))
        if body is not None and form:
            self.report(f"{where}: both a body and form parameters; the form parameters dropped")
            form = []
        return specs, body, form

    def parameter(self, parameter: Mapping[str, Any], label: str, taken: set[str]) -> ParameterSpec:
        """One path, query, header or cookie parameter with its real schema."""
        location = parameter["in"]
        style, explode = parameter.get("style"), parameter.get("explode")
        if self.v2:
            schema = self.refs.schema(
                {k: parameter[k] for k in _V2_SCHEMA_FIELDS if k in parameter}, label
            )
            if schema.get("type") == "array":
                given = str(parameter.get("collectionFormat", "csv"))
                form = _V2_STYLES.get(given)
                if form is None:
                    self.report(
                        f"{label}: collectionFormat {echo(given, 30)} is not supported; sent as csv"
                    )
                    form = _V2_STYLES["csv"]
                style, explode = form
                if location in ("path", "header"):
                    style = "simple"
        elif "schema" in parameter:
            schema = self.refs.schema(parameter["schema"], label)
        elif isinstance(parameter.get("content"), Mapping) and parameter["content"]:
            media, value = next(iter(parameter["content"].items()))
            self.report(f"{label}: described by content ({echo(media, 60)}); its schema is used")
            raw = value.get("schema") if isinstance(value, Mapping) else None
            schema = self.refs.schema(raw, label)
        else:
            self.report(f"{label} has no schema; taken as a string")
            schema = {"type": "string"}
        return ParameterSpec(
            name=parameter["name"],
            location=location,
            argument=argument_name(parameter["name"], taken),
            required=location == "path" or parameter.get("required") is True,
            schema=schema,
            description=_text(parameter.get("description")),
            style=style if isinstance(style, str) else None,
            explode=explode if isinstance(explode, bool) else None,
        )

    def path_parameters(
        self, path: str, specs: list[ParameterSpec], where: str
    ) -> list[ParameterSpec]:
        """The parameters with every path placeholder declared, and no stray one."""
        placeholders = re.findall(r"{([^{}]*)}", path)
        kept = []
        for spec in specs:
            if spec.location == "path" and spec.name not in placeholders:
                self.report(
                    f"{where}: path parameter {echo(spec.name, 60)} is not in the path; dropped"
                )
            else:
                kept.append(spec)
        declared = {spec.name for spec in kept if spec.location == "path"}
        taken = {spec.argument for spec in kept}
        for placeholder in dict.fromkeys(placeholders):
            if placeholder not in declared:
                self.report(
                    f"{where}: the path names {{{truncate(placeholder, 60, '…')}}}, which no "
                    "parameter declares; added as a required string"
                )
                kept.append(
                    ParameterSpec(
                        name=placeholder,
                        location="path",
                        argument=argument_name(placeholder, taken),
                        required=True,
                        schema={"type": "string"},
                    )
                )
        return kept

    # -- bodies ----------------------------------------------------------------------------------

    def body(self, request_body: Mapping[str, Any], where: str, taken: set[str]) -> BodySpec | None:
        """An OpenAPI 3 request body in its preferred media type (None: no media type)."""
        content = request_body.get("content")
        if not isinstance(content, Mapping) or not content:
            self.report(f"{where}: the request body names no media type; sent without a body")
            return None
        media = _choose_media([str(key) for key in content])
        assert media is not None
        entry = content[media] if isinstance(content[media], Mapping) else {}
        raw = entry.get("schema")
        schema = self.refs.schema(raw, f"{where} body") if raw is not None else {}
        base = _media_base(media)
        if "*" in base:
            structured = schema.get("type") in ("object", "array") or "properties" in schema
            chosen = "application/json" if structured else "application/octet-stream"
            self.report(f"{where}: the body's media type {media} is sent as {chosen}")
            media = base = chosen
        encoding = entry.get("encoding")
        kept_encoding: dict[str, dict[str, Any]] = {}
        if isinstance(encoding, Mapping) and base.startswith(("multipart/", "application/x-www")):
            for prop, value in encoding.items():
                if isinstance(value, Mapping):
                    if value.get("headers"):
                        self.report(
                            f"{where}: the encoding headers of {echo(prop, 60)} are ignored"
                        )
                    kept_encoding[prop] = {k: value[k] for k in _ENCODING_KEYS if k in value}
        return BodySpec(
            content_type=media,
            argument=argument_name("body" if "body" not in taken else "request_body", taken),
            schema=self._body_schema(schema, base),
            required=request_body.get("required") is True,
            description=_text(request_body.get("description")),
            encoding=kept_encoding,
            xml_root=self.xml_root(raw) if _is_xml(base) else None,
        )

    def _body_schema(self, schema: dict[str, Any], base: str) -> dict[str, Any]:
        if _is_binary_media(base) and (not schema or schema.get("type") == "string"):
            note = "The request body as bytes, base64-encoded."
            return {**BINARY, "description": str(schema.get("description") or note)}
        return schema

    def xml_root(self, raw: Any) -> str | None:
        """The root element of an XML body: ``xml.name``, else the referenced schema's name."""
        name: str | None = None
        for _ in range(16):  # a chain of references, maybe a cycle
            if not isinstance(raw, Mapping):
                break
            xml = raw.get("xml")
            if isinstance(xml, Mapping) and isinstance(xml.get("name"), str):
                return str(xml["name"])
            ref = raw.get("$ref")
            if not isinstance(ref, str):
                break
            name = name or ref.rsplit("/", 1)[-1]
            raw = self.refs.lookup(ref, "", quiet=True)
        return name

    def _consumes(self, operation: Mapping[str, Any]) -> list[str]:
        consumes = operation.get("consumes", self.doc.get("consumes"))
        return [str(item) for item in consumes] if isinstance(consumes, list) else []

    def v2_body(
        self,
        parameter: Mapping[str, Any],
        operation: Mapping[str, Any],
        where: str,
        taken: set[str],
    ) -> BodySpec:
        """A Swagger 2.0 ``in: body`` parameter as the request body."""
        media = _choose_media(self._consumes(operation)) or "application/json"
        raw = parameter.get("schema")
        base = _media_base(media)
        schema = self.refs.schema(raw, f"{where} body") if raw is not None else {}
        return BodySpec(
            content_type=media,
            argument=argument_name("body" if "body" not in taken else "request_body", taken),
            schema=self._body_schema(schema, base),
            required=parameter.get("required") is True,
            description=_text(parameter.get("description")),
            xml_root=self.xml_root(raw) if _is_xml(base) else None,
        )

    def v2_form(
        self,
        form: list[Mapping[str, Any]],
        operation: Mapping[str, Any],
        where: str,
        taken: set[str],
    ) -> BodySpec:
        """Swagger 2.0 ``in: formData`` parameters as a form or multipart body."""
        properties: dict[str, Any] = {}
        required: list[str] = []
        encoding: dict[str, dict[str, Any]] = {}
        for parameter in form:
            name = parameter["name"]
            label = f"{where}: form parameter {echo(name, 60)}"
            schema = self.refs.schema(
                {k: parameter[k] for k in _V2_SCHEMA_FIELDS if k in parameter}, label
            )
            if isinstance(parameter.get("description"), str) and "description" not in schema:
                schema["description"] = _text(parameter["description"])
            if schema.get("type") == "array":
                style, explode = _V2_STYLES.get(
                    str(parameter.get("collectionFormat", "csv")), _V2_STYLES["csv"]
                )
                encoding[name] = {"style": style, "explode": explode}
            properties[name] = schema
            if parameter.get("required") is True:
                required.append(name)
        consumes = [_media_base(media) for media in self._consumes(operation)]
        files = any(parameter.get("type") == "file" for parameter in form)
        multipart = files or (
            "multipart/form-data" in consumes
            and "application/x-www-form-urlencoded" not in consumes
        )
        schema = {"type": "object", "properties": properties}
        if required:
            schema["required"] = required
        return BodySpec(
            content_type="multipart/form-data"
            if multipart
            else "application/x-www-form-urlencoded",
            argument=argument_name("body" if "body" not in taken else "request_body", taken),
            schema=schema,
            required=bool(required),
            encoding=encoding,
        )
