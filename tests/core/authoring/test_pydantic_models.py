"""pydantic ``BaseModel`` parameters (``core/authoring/pydantic_models.py``): pydantic's own
JSON Schema, kept under ``$defs`` beside the records'; pydantic validates the argument and the
function receives a model instance; pydantic is imported only when a signature uses it."""

import json
import subprocess
import sys
import textwrap
from collections.abc import Callable
from typing import Annotated, Any, Literal

import attrs
import pydantic
import pytest
from support.authoring import function_error, parameters_of, run_function

import expediter
from expediter.core.turns.providers.jsonschema import model_schema, strict_schema
from expediter.errors import SchemaError


class Item(pydantic.BaseModel):
    """One line of an order."""

    sku: str = pydantic.Field(description="The product code.")
    qty: int = pydantic.Field(default=1, gt=0)


class Order(pydantic.BaseModel):
    items: list[Item] = pydantic.Field(min_length=1)
    note: str | None = None
    speed: Literal["slow", "fast"] = "slow"


class Node(pydantic.BaseModel):
    """A tree node."""

    value: int
    children: list["Node"] = []


class Credentials(pydantic.BaseModel):
    user: str
    phrase: Annotated[str, expediter.Secret]
    token: pydantic.SecretStr | None = None

    @pydantic.field_validator("phrase")
    @classmethod
    def _long_enough(cls, value: str) -> str:
        if len(value) < 12:
            raise ValueError(f"phrase {value!r} is too short")
        return value

    @pydantic.model_validator(mode="after")
    def _not_the_user(self) -> "Credentials":
        if self.user in self.phrase:
            raise ValueError(f"{self.phrase} contains the user name")
        return self


class Address(pydantic.BaseModel):
    """A pydantic address: not the attrs one below."""

    line: str


class Customer(pydantic.BaseModel):
    address: Address


def _record_named_address() -> type:
    @attrs.frozen
    class Address:  # an attrs record with the pydantic model's name
        street: str

    return Address


RecordAddress = _record_named_address()


def place(order: Order) -> Order:
    """Place an order."""
    return order


def grow(tree: Node) -> int:
    return len(tree.children)


def sign_in(account: Credentials) -> str:
    return account.user


def _resolve(reference: str, root: dict[str, Any]) -> Any:
    assert reference.startswith("#/$defs/")
    return root["$defs"][reference.removeprefix("#/$defs/")]


def _references(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return found + [ref for value in node.values() for ref in _references(value)]
    if isinstance(node, list):
        return [ref for value in node for ref in _references(value)]
    return []


# -- the schema -----------------------------------------------------------------------------------


def test_a_model_parameter_gets_pydantics_schema_under_defs() -> None:
    expected = Order.model_json_schema(ref_template="#/$defs/{model}")
    defs = expected.pop("$defs")
    assert parameters_of(place) == {
        "type": "object",
        "properties": {"order": {"$ref": "#/$defs/Order"}},
        "required": ["order"],
        "additionalProperties": False,
        "$defs": {**defs, "Order": expected},
    }
    item = defs["Item"]
    assert item["properties"]["sku"]["description"] == "The product code."
    assert item["properties"]["qty"]["exclusiveMinimum"] == 0
    assert item["description"] == "One line of an order."


def test_a_recursive_model_refers_to_itself_and_passes_strict_mode() -> None:
    schema = parameters_of(grow)
    assert schema["properties"]["tree"] == {"$ref": "#/$defs/Node"}
    assert schema["$defs"]["Node"]["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}
    [action] = expediter.tool(grow).get_actions_metadata()
    strict = strict_schema(model_schema(action))
    assert strict["$defs"]["Node"]["required"] == ["value", "children"]
    assert strict["$defs"]["Node"]["additionalProperties"] is False


def test_a_model_used_twice_has_one_definition() -> None:
    def move(source: Order, target: Order | None = None) -> None:
        return None

    schema = parameters_of(move)
    assert sorted(schema["$defs"]) == ["Item", "Order"]
    assert schema["properties"]["target"]["anyOf"][0] == {"$ref": "#/$defs/Order"}


def _ship_model_first(customer: Customer, to: RecordAddress) -> None:  # type: ignore[valid-type]
    return None


def _ship_record_first(to: RecordAddress, customer: Customer) -> None:  # type: ignore[valid-type]
    return None


@pytest.mark.parametrize("ship", [_ship_model_first, _ship_record_first])
def test_a_model_and_a_record_of_the_same_name_get_distinct_definitions(
    ship: Callable[..., None],
) -> None:
    schema = parameters_of(ship)
    assert sorted(schema["$defs"]) == ["Address", "Address2", "Customer"]
    customer = _resolve(schema["properties"]["customer"]["$ref"], schema)
    model_address = _resolve(customer["properties"]["address"]["$ref"], schema)
    record_address = _resolve(schema["properties"]["to"]["$ref"], schema)
    assert set(model_address["properties"]) == {"line"}
    assert set(record_address["properties"]) == {"street"}
    for reference in _references(schema):
        _resolve(reference, schema)  # every reference resolves


def test_a_secret_model_field_is_write_only_and_a_secret_name() -> None:
    [action] = expediter.tool(sign_in).get_actions_metadata()
    properties = action.parameters["$defs"]["Credentials"]["properties"]
    assert properties["phrase"]["writeOnly"] is True
    assert {"phrase", "token"} <= action.secret_parameters


def test_the_rich_model_schema_passes_strict_mode() -> None:
    [action] = expediter.tool(place).get_actions_metadata()
    strict = strict_schema(model_schema(action))
    assert strict["$defs"]["Item"]["required"] == ["sku", "qty"]
    assert "default" not in json.dumps(strict)


def test_a_model_whose_schema_generation_raises_is_a_schema_error() -> None:
    class Hooked(pydantic.BaseModel):
        callback: Callable[[int], int]

    def run(hooked: Hooked) -> None:
        return None

    with pytest.raises(SchemaError) as caught:
        _ = expediter.tool(run).spec
    message = str(caught.value)
    assert "run: parameter 'hooked'" in message
    assert "Hooked" in message
    assert "pydantic" in message


def test_a_model_with_an_undefined_forward_reference_is_a_schema_error() -> None:
    class Dangling(pydantic.BaseModel):
        other: "Nowhere"  # type: ignore[name-defined]  # noqa: F821

    def run(dangling: Dangling) -> None:
        return None

    with pytest.raises(SchemaError, match=r"run: parameter 'dangling'.*Dangling"):
        _ = expediter.tool(run).spec


def test_a_pydantic_v1_model_is_refused_clearly() -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from pydantic import v1

        class Old(v1.BaseModel):
            x: int

    def run(old: Old) -> None:
        return None

    with pytest.raises(SchemaError, match=r"parameter 'old'.*pydantic v1"):
        _ = expediter.tool(run).spec


# -- validation -----------------------------------------------------------------------------------


def test_a_model_argument_arrives_as_a_model_instance() -> None:
    order = run_function(place, {"order": {"items": [{"sku": "A1", "qty": 2}, {"sku": "B2"}]}})
    assert isinstance(order, Order)
    assert order.items == [Item(sku="A1", qty=2), Item(sku="B2", qty=1)]


def test_a_list_of_models_and_an_optional_model_arrive_as_instances() -> None:
    def pack(items: list[Item], spare: Item | None = None) -> Any:
        return items, spare

    items, spare = run_function(pack, {"items": [{"sku": "A"}], "spare": {"sku": "S"}})
    assert items == [Item(sku="A")]
    assert spare == Item(sku="S")
    assert run_function(pack, {"items": [], "spare": None}) == ([], None)


def test_a_model_instance_passed_from_python_is_taken_as_is(
    make_host: Callable[..., expediter.Host],
) -> None:
    host = make_host(expediter.tool(place))
    order = Order(items=[Item(sku="A")])
    event = host.call("place", "place", {"order": order})
    assert event.status == "completed"
    assert event.result == {"items": [{"sku": "A", "qty": 1}], "note": None, "speed": "slow"}


@pytest.mark.parametrize(
    ("order", "problem"),
    [
        pytest.param(
            {"items": [{"sku": "A", "qty": 0}]},
            "argument 'order.items[0].qty': Input should be greater than 0, got 0",
            id="constraint",
        ),
        pytest.param(
            {"items": [{"sku": "A", "qty": "2"}]},
            "argument 'order.items[0].qty': Input should be a valid integer, got '2'",
            id="strict-types",
        ),
        pytest.param(
            {"items": []},
            "argument 'order.items': List should have at least 1 item after validation, not 0",
            id="min-length",
        ),
        pytest.param(
            {"items": [{"qty": 1}]},
            "argument 'order.items[0].sku': missing (it is required)",
            id="missing",
        ),
        pytest.param(
            {"items": [{"sku": "A"}], "speed": "warp"},
            "argument 'order.speed': Input should be 'slow' or 'fast', got 'warp'",
            id="literal",
        ),
        pytest.param("A1 x2", "argument 'order': expected object, got string 'A1 x2'", id="str"),
    ],
)
def test_a_bad_model_argument_is_an_argument_error_naming_the_path(
    order: Any, problem: str
) -> None:
    assert function_error(place, {"order": order}) == f"place: {problem}"


def test_every_problem_of_a_model_is_listed() -> None:
    message = function_error(place, {"order": {"items": [{"qty": 0}], "speed": 1}})
    assert message.count("argument 'order.") == 3
    assert "order.items[0].sku" in message
    assert "order.items[0].qty" in message
    assert "order.speed" in message


def test_a_validation_error_never_shows_a_secret_value(
    call_tool: Callable[..., expediter.CallEvent],
) -> None:
    tool = expediter.tool(sign_in)
    short = {"account": {"user": "ann", "phrase": "s3cr3t-pw"}}
    message = function_error(sign_in, short)
    assert "s3cr3t-pw" not in message
    assert message == "sign_in: argument 'account.phrase': invalid (value_error)"
    # A model-level validator quoting the secret: the value is masked out of its message.
    containing = {"account": {"user": "ann", "phrase": "ann-long-enough-phrase"}}
    message = function_error(sign_in, containing)
    assert "ann-long-enough-phrase" not in message
    assert message == "sign_in: argument 'account': Value error, *** contains the user name"
    event = call_tool(tool, "sign_in", containing)
    assert event.error_type == "ArgumentError"
    assert "ann-long-enough-phrase" not in json.dumps(event.to_dict())
    # A SecretStr that is not a string: its value is not quoted either.
    wrong = {"account": {"user": "bob", "phrase": "x" * 20, "token": 987654321}}
    message = function_error(sign_in, wrong)
    assert "987654321" not in message


def test_a_validator_raising_another_exception_is_an_argument_error_without_the_secret() -> None:
    class Vault(pydantic.BaseModel):
        phrase: Annotated[str, expediter.Secret]

        @pydantic.field_validator("phrase")
        @classmethod
        def _explode(cls, value: str) -> str:
            raise RuntimeError(f"cannot check {value}")

    def open_vault(vault: Vault) -> None:
        raise AssertionError("not called")

    message = function_error(open_vault, {"vault": {"phrase": "open-sesame-42"}})
    assert "open-sesame-42" not in message
    assert message == "open_vault: argument 'vault': invalid (RuntimeError: cannot check ***)"


def test_a_recursive_model_argument_is_validated_at_every_depth() -> None:
    tree = {"value": 1, "children": [{"value": 2, "children": [{"value": "x"}]}]}
    message = function_error(grow, {"tree": tree})
    assert message == (
        "grow: argument 'tree.children[0].children[0].value': "
        "Input should be a valid integer, got 'x'"
    )
    assert run_function(grow, {"tree": {"value": 1, "children": [{"value": 2}]}}) == 1


def test_a_secret_model_parameter_shows_no_values_at_all() -> None:
    def store(item: Annotated[Item, expediter.Secret]) -> None:
        return None

    message = function_error(store, {"item": {"sku": "TOPSECRET", "qty": -1}})
    assert "TOPSECRET" not in message
    assert "-1" not in message
    assert message == "store: argument 'item.qty': invalid (greater_than)"


def test_a_model_returned_by_a_tool_is_its_json_form(
    call_tool: Callable[..., expediter.CallEvent],
) -> None:
    event = call_tool(expediter.tool(place), "place", {"order": {"items": [{"sku": "A"}]}})
    assert event.status == "completed"
    assert event.result == {"items": [{"sku": "A", "qty": 1}], "note": None, "speed": "slow"}


# -- pydantic is imported only when a signature uses it -------------------------------------------

PLAIN_TOOL = textwrap.dedent(
    """
    import sys
    from typing import Annotated

    import expediter


    @expediter.tool
    def plain(n: Annotated[int, "How many."], tags: list[str] = (), on: bool | None = None) -> int:
        return n


    host = expediter.Host(plugins=[plain], builtins=False, autoload=False, record_calls=False)
    assert host.catalogue()[0].actions[0].parameters["required"] == ["n"]
    assert host.call("plain", "plain", {"n": 2}).result == 2
    assert host.call("plain", "plain", {"n": "2"}).error_type == "ArgumentError"
    heavy = ("pydantic", "pydantic_core", "annotated_types")
    print([name for name in heavy if name in sys.modules])
    """
)


def test_a_tool_with_plain_types_never_imports_pydantic(tmp_path: Any) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PLAIN_TOOL],
        capture_output=True,
        text=True,
        check=False,
        env={"EXPEDITER_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
