"""The actions of an ``http`` instance, as stored in its configuration (``config["actions"]``).

Each action is one JSON object; the OpenAPI import writes them, an operator may write them by
hand (``expediter instances add http --config ...``)::

    {
      "name": "get_pet_by_id",              # what `expediter call ID ACTION` takes (<= 64 chars)
      "description": "Find a pet by id",
      "method": "GET",                      # any HTTP method, upper-cased on load
      "path": "/pets/{petId}",              # appended to the instance's base_url
      "parameters": [                       # path, query, header and cookie parameters
        {"name": "petId", "in": "path", "required": true, "schema": {"type": "integer"},
         "description": "...", "argument": "petId", "style": "simple", "explode": false}
      ],
      "body": {                             # or absent/null: the request has no body
        "content_type": "application/json", # json, form, multipart, text/plain, xml, octet-stream
        "schema": {...},                    # JSON Schema of the body argument
        "required": true,
        "description": "...",
        "encoding": {"tags": {"style": "form", "explode": true, "contentType": "..."}},
        "xml_root": "Pet",                  # the root element's name for XML bodies
        "argument": "body"                  # the argument that carries the body
      },
      "fixed": {"api_version": "2"},        # argument values the operator fixes (hidden from
                                            # the model; they win over its values)
      "security": ["api_key"],              # the schemes that apply (absent: every configured one)
      "require_approval": false
    }

``argument`` is the name the model sees for a parameter (default: the parameter's name when it
is a valid property name, else a sanitized form, unique within the action); the request uses
``name``. The model's arguments for an action are one object: each parameter's ``argument`` and
the body's ``argument``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import attrs

import expediter
from expediter.errors import ConfigError

__all__ = [
    "ACTION_NAME",
    "LOCATIONS",
    "BodySpec",
    "HttpAction",
    "ParameterSpec",
    "argument_name",
    "load_actions",
]

#: A valid action (and provider function) name.
ACTION_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
#: Where a parameter goes.
LOCATIONS = ("path", "query", "header", "cookie")
#: The property names every provider accepts (Anthropic's rule is the narrowest).
_ARGUMENT = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_OUTSIDE = re.compile(r"[^A-Za-z0-9_.-]")
_METHOD = re.compile(r"^[A-Z]{1,20}$")

Location = Literal["path", "query", "header", "cookie"]


def argument_name(name: str, taken: set[str]) -> str:
    """The property name the model sees for a parameter called ``name``: itself when valid,
    else a sanitized form; made unique against ``taken`` (which it joins)."""
    base = name if _ARGUMENT.fullmatch(name) else (_OUTSIDE.sub("_", name)[:60] or "arg")
    candidate, number = base, 2
    while candidate in taken:
        candidate = f"{base[:58]}_{number}"
        number += 1
    taken.add(candidate)
    return candidate


def _schema(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


@attrs.frozen
class ParameterSpec:
    """One path, query, header or cookie parameter."""

    name: str
    location: Location
    argument: str
    required: bool = False
    schema: Mapping[str, Any] = attrs.field(factory=dict)
    description: str = ""
    #: OpenAPI serialization: ``simple`` (path, header), ``form`` (query, cookie), ``label``,
    #: ``matrix``, ``spaceDelimited``, ``pipeDelimited``, ``deepObject``.
    style: str | None = None
    explode: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "name": self.name,
            "in": self.location,
            "argument": self.argument,
            "required": self.required,
            "schema": dict(self.schema),
        }
        if self.description:
            data["description"] = self.description
        if self.style is not None:
            data["style"] = self.style
        if self.explode is not None:
            data["explode"] = self.explode
        return data


@attrs.frozen
class BodySpec:
    """The request body of an action."""

    content_type: str
    argument: str = "body"
    schema: Mapping[str, Any] = attrs.field(factory=dict)
    required: bool = False
    description: str = ""
    #: The OpenAPI encoding object of form and multipart bodies, by property.
    encoding: Mapping[str, Mapping[str, Any]] = attrs.field(factory=dict)
    xml_root: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "content_type": self.content_type,
            "argument": self.argument,
            "schema": dict(self.schema),
            "required": self.required,
        }
        if self.description:
            data["description"] = self.description
        if self.encoding:
            data["encoding"] = {key: dict(value) for key, value in self.encoding.items()}
        if self.xml_root:
            data["xml_root"] = self.xml_root
        return data


@attrs.frozen
class HttpAction:
    """One operation of an ``http`` instance."""

    name: str
    method: str
    path: str
    description: str = ""
    parameters: tuple[ParameterSpec, ...] = ()
    body: BodySpec | None = None
    fixed: Mapping[str, Any] = attrs.field(factory=dict)
    security: tuple[str, ...] | None = None
    require_approval: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The stored JSON form (what ``from_dict`` reads back)."""
        data: dict[str, Any] = {
            "name": self.name,
            "method": self.method,
            "path": self.path,
            "parameters": [parameter.to_dict() for parameter in self.parameters],
        }
        if self.description:
            data["description"] = self.description
        if self.body is not None:
            data["body"] = self.body.to_dict()
        if self.fixed:
            data["fixed"] = dict(self.fixed)
        if self.security is not None:
            data["security"] = list(self.security)
        if self.require_approval:
            data["require_approval"] = True
        return data

    @classmethod
    def from_dict(cls, data: Any) -> HttpAction:
        """Read one stored action; ConfigError naming what is wrong."""
        if not isinstance(data, Mapping):
            raise ConfigError(f"an http action must be an object, not {type(data).__name__}")
        name = data.get("name")
        if not isinstance(name, str) or not ACTION_NAME.fullmatch(name):
            raise ConfigError(
                f"http action name {name!r} must match {ACTION_NAME.pattern} "
                "(letters, digits, _ and -, at most 64)"
            )
        method = str(data.get("method") or "GET").upper()
        if not _METHOD.fullmatch(method):
            raise ConfigError(f"http action {name}: method {method!r} is not an HTTP method")
        path = data.get("path") or ""
        if not isinstance(path, str) or (path and not path.startswith("/")):
            raise ConfigError(f"http action {name}: path {path!r} must start with '/'")
        taken: set[str] = set()
        parameters = tuple(
            _parameter(name, item, taken) for item in _list(name, data.get("parameters"))
        )
        for placeholder in re.findall(r"{([^{}]*)}", path):
            if not any(p.location == "path" and p.name == placeholder for p in parameters):
                raise ConfigError(
                    f"http action {name}: path placeholder {{{placeholder}}} has no path parameter"
                )
        body = _body(name, data.get("body"), taken)
        fixed = data.get("fixed") or {}
        if not isinstance(fixed, Mapping):
            raise ConfigError(f"http action {name}: fixed must be an object")
        security = data.get("security")
        if security is not None and not (
            isinstance(security, list) and all(isinstance(item, str) for item in security)
        ):
            raise ConfigError(f"http action {name}: security must be a list of scheme names")
        return cls(
            name=name,
            method=method,
            path=path,
            description=str(data.get("description") or ""),
            parameters=parameters,
            body=body,
            fixed=dict(fixed),
            security=None if security is None else tuple(security),
            require_approval=bool(data.get("require_approval", False)),
        )

    @property
    def arguments_schema(self) -> dict[str, Any]:
        """The JSON Schema of the model's arguments (one object)."""
        properties: dict[str, Any] = {}
        required: list[str] = []
        for parameter in self.parameters:
            schema = dict(parameter.schema) or {"type": "string"}
            if parameter.description and "description" not in schema:
                schema["description"] = parameter.description
            properties[parameter.argument] = schema
            if parameter.required:
                required.append(parameter.argument)
        if self.body is not None:
            schema = dict(self.body.schema) or _default_body_schema(self.body.content_type)
            if self.body.description and "description" not in schema:
                schema["description"] = self.body.description
            properties[self.body.argument] = schema
            if self.body.required:
                required.append(self.body.argument)
        result: dict[str, Any] = {"type": "object", "properties": properties}
        if required:
            result["required"] = required
        return result

    def to_action(self) -> expediter.Action:
        """The action offered to the model."""
        return expediter.Action(
            name=self.name,
            description=self.description or f"{self.method} {self.path or '/'}",
            parameters=self.arguments_schema,
            fixed=self.fixed,
            require_approval=self.require_approval,
        )


def _default_body_schema(content_type: str) -> dict[str, Any]:
    # The body encoder decides what each media type takes; the model is told the same.
    from expediter_http.bodies import default_body_schema

    return default_body_schema(content_type)


def _list(action: str, value: Any) -> Sequence[Any]:
    if value is None:
        return ()
    if not isinstance(value, list | tuple):
        raise ConfigError(f"http action {action}: parameters must be a list")
    return value


def _parameter(action: str, data: Any, taken: set[str]) -> ParameterSpec:
    if not isinstance(data, Mapping) or not isinstance(data.get("name"), str):
        raise ConfigError(f"http action {action}: each parameter needs a name")
    location = data.get("in", "query")
    if location not in LOCATIONS:
        raise ConfigError(
            f"http action {action}: parameter {data['name']!r} is in {location!r}; "
            f"expected one of {', '.join(LOCATIONS)}"
        )
    argument = data.get("argument")
    if isinstance(argument, str) and _ARGUMENT.fullmatch(argument) and argument not in taken:
        taken.add(argument)
    else:
        argument = argument_name(data["name"], taken)
    explode = data.get("explode")
    return ParameterSpec(
        name=data["name"],
        location=location,
        argument=argument,
        # A path placeholder must be filled: a path parameter is required whatever it says.
        required=location == "path" or bool(data.get("required", False)),
        schema=_schema(data.get("schema")),
        description=str(data.get("description") or ""),
        style=data.get("style") if isinstance(data.get("style"), str) else None,
        explode=explode if isinstance(explode, bool) else None,
    )


def _body(action: str, data: Any, taken: set[str]) -> BodySpec | None:
    if data is None:
        return None
    if not isinstance(data, Mapping) or not isinstance(data.get("content_type"), str):
        raise ConfigError(f"http action {action}: body needs a content_type")
    argument = data.get("argument")
    if not (isinstance(argument, str) and _ARGUMENT.fullmatch(argument) and argument not in taken):
        argument = argument_name("body" if "body" not in taken else "request_body", taken)
    else:
        taken.add(argument)
    encoding = data.get("encoding") or {}
    if not isinstance(encoding, Mapping):
        raise ConfigError(f"http action {action}: body encoding must be an object")
    return BodySpec(
        content_type=data["content_type"],
        argument=argument,
        schema=_schema(data.get("schema")),
        required=bool(data.get("required", False)),
        description=str(data.get("description") or ""),
        encoding={str(k): dict(v) for k, v in encoding.items() if isinstance(v, Mapping)},
        xml_root=data.get("xml_root") if isinstance(data.get("xml_root"), str) else None,
    )


def load_actions(value: Any) -> dict[str, HttpAction]:
    """The stored actions by name; ConfigError for a malformed one or a repeated name."""
    if value is None:
        return {}
    if not isinstance(value, list | tuple):
        raise ConfigError("the http tool's actions must be a list of action objects")
    actions: dict[str, HttpAction] = {}
    for item in value:
        action = HttpAction.from_dict(item)
        if action.name in actions:
            raise ConfigError(f"http action name {action.name!r} is used twice")
        actions[action.name] = action
    return actions
