"""Docstrings (``core/authoring/docstrings.py``): the summary and the per-argument descriptions,
in Google, Sphinx/reST, NumPy and epydoc style."""

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import expediter
from expediter.core.authoring.docstrings import Docstring, parse_docstring
from expediter.core.authoring.tools import Toolbox
from expediter.hookspecs.tool import CallContext

FULL = """Convert an amount between two currencies
using today's rate.

More detail that is not part of the summary:
rates come from the central bank.

Args:
    amount (float): How much to convert.
    source: The ISO code to convert from,
        e.g. "EUR"; continuation lines are joined.
    target (str, optional): The ISO code to convert to.
    *args: Ignored positional values.
    **kwargs (dict): Extra options
        for the rate provider.

Returns:
    float: The converted amount.
    rate: not an argument, even though it looks like one.

Raises:
    ValueError: on an unknown currency.

Example:
    >>> convert(1, "EUR", "USD")
    amount: 1.08
"""


def test_full_google_docstring() -> None:
    assert parse_docstring(FULL) == Docstring(
        summary="Convert an amount between two currencies using today's rate.",
        arguments={
            "amount": "How much to convert.",
            "source": 'The ISO code to convert from, e.g. "EUR"; continuation lines are joined.',
            "target": "The ISO code to convert to.",
            "args": "Ignored positional values.",
            "kwargs": "Extra options for the rate provider.",
        },
    )


@pytest.mark.parametrize("doc", [None, "", "   ", "\n\n   \n"])
def test_missing_or_blank_docstring_gives_empty_parts(doc: str | None) -> None:
    assert parse_docstring(doc) == Docstring(summary="", arguments={})


def test_summary_is_the_first_paragraph_joined_into_one_line() -> None:
    doc = """
        Look up the weather
          for one city,
        right now.

        Second paragraph.
        """
    assert parse_docstring(doc).summary == "Look up the weather for one city, right now."


def test_summary_stops_at_a_section_header_without_a_blank_line() -> None:
    doc = "Add two numbers.\nArgs:\n    a: The first.\n    b: The second.\n"
    assert parse_docstring(doc) == Docstring(
        summary="Add two numbers.", arguments={"a": "The first.", "b": "The second."}
    )


def test_docstring_with_only_sections_has_an_empty_summary() -> None:
    doc = "Args:\n    city: Where.\n"
    assert parse_docstring(doc) == Docstring(summary="", arguments={"city": "Where."})


def test_summary_line_ending_with_a_colon_is_still_the_summary() -> None:
    doc = "Search the catalogue by one of:\n\n- title\n- author\n"
    assert parse_docstring(doc).summary == "Search the catalogue by one of:"


@pytest.mark.parametrize(
    ("line", "name", "text"),
    [
        ("city: The city.", "city", "The city."),
        ("city (str): The city.", "city", "The city."),
        ("city(str): The city.", "city", "The city."),
        ("limit (int, optional): At most this many.", "limit", "At most this many."),
        ("tags (list[str]): Labels.", "tags", "Labels."),
        ("*paths: Files.", "paths", "Files."),
        ("**options (dict[str, int]): Knobs.", "options", "Knobs."),
        ("note: Has: a colon inside.", "note", "Has: a colon inside."),
        ("empty:", "empty", ""),
    ],
)
def test_args_entry_forms(line: str, name: str, text: str) -> None:
    assert parse_docstring(f"Do it.\n\nArgs:\n    {line}\n").arguments == {name: text}


def test_description_may_start_on_the_next_line() -> None:
    doc = "Do it.\n\nArgs:\n    query:\n        The words\n        to find.\n"
    assert parse_docstring(doc).arguments == {"query": "The words to find."}


def test_deeper_indented_line_that_looks_like_an_entry_is_a_continuation() -> None:
    doc = "Do it.\n\nArgs:\n    mode: One of\n        fast: quick and rough\n    depth: Levels.\n"
    assert parse_docstring(doc).arguments == {
        "mode": "One of fast: quick and rough",
        "depth": "Levels.",
    }


def test_blank_line_inside_an_entry_keeps_joining_it() -> None:
    doc = "Do it.\n\nArgs:\n    mode: First part.\n\n        Second part.\n    depth: Levels.\n"
    assert parse_docstring(doc).arguments == {
        "mode": "First part. Second part.",
        "depth": "Levels.",
    }


@pytest.mark.parametrize(
    "header", ["Args:", "Arguments:", "Parameters:", "Params:", "Keyword Args:", "args:"]
)
def test_argument_section_names(header: str) -> None:
    doc = f"Do it.\n\n{header}\n    x: The x.\n"
    assert parse_docstring(doc).arguments == {"x": "The x."}


@pytest.mark.parametrize(
    "section", ["Returns:", "Raises:", "Example:", "Examples:", "Note:", "Yields:", "Attributes:"]
)
def test_other_sections_are_ignored(section: str) -> None:
    doc = f"Do it.\n\n{section}\n    x: Not an argument.\n\nArgs:\n    y: The y.\n"
    assert parse_docstring(doc) == Docstring(summary="Do it.", arguments={"y": "The y."})


def test_section_after_args_ends_the_args() -> None:
    doc = "Do it.\n\nArgs:\n    y: The y.\nReturns:\n    z: A value.\n"
    assert parse_docstring(doc).arguments == {"y": "The y."}


def test_indented_source_docstring_is_dedented_first() -> None:
    def convert(amount: float) -> float:
        """Convert an amount.

        Args:
            amount: How much.
                In cents.
        """
        return amount

    assert parse_docstring(convert.__doc__) == Docstring(
        summary="Convert an amount.", arguments={"amount": "How much. In cents."}
    )


# -- properties -----------------------------------------------------------------------------------


@given(st.text())
def test_parsing_any_text_never_raises(doc: str) -> None:
    result = parse_docstring(doc)
    assert isinstance(result.summary, str)
    assert all(isinstance(text, str) for text in result.arguments.values())


_WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123456789,'-", min_size=1)
_SENTENCE = st.lists(_WORD, min_size=1, max_size=6).map(lambda words: " ".join(words) + ".")
_NAME = st.from_regex(r"[a-z_][a-z0-9_]{0,10}", fullmatch=True)


@given(
    summary=st.lists(_SENTENCE, min_size=1, max_size=3),
    entries=st.dictionaries(_NAME, st.lists(_SENTENCE, min_size=1, max_size=3), max_size=5),
    typed=st.booleans(),
)
def test_well_formed_docstring_round_trips(
    summary: list[str], entries: dict[str, list[str]], typed: bool
) -> None:
    lines = [*summary, ""]
    if entries:
        lines.append("Args:")
        for name, (first, *rest) in entries.items():
            lines.append(f"    {name}{' (int)' if typed else ''}: {first}")
            lines.extend(f"        {more}" for more in rest)
        lines += ["", "Returns:", "    int: a value."]
    parsed = parse_docstring("\n".join(lines))
    assert parsed.summary == " ".join(summary)
    assert parsed.arguments == {name: " ".join(texts) for name, texts in entries.items()}


# -- descriptions in schemas ----------------------------------------------------------------------


@expediter.tool
def forecast(
    city: str,
    days: Annotated[int, "Days ahead (from Annotated)."] = 1,
    units: str = "metric",
    detail: bool = False,
) -> str:
    """Forecast the weather
    for one city.

    Args:
        city: The city, e.g. "Oslo".
        days: Days ahead (from the docstring).
        units (str): Unit system:
            metric or imperial.
    """
    return city


def test_docstring_gives_tool_description_and_parameter_descriptions() -> None:
    [action] = forecast.get_actions_metadata()
    assert action.description == "Forecast the weather for one city."
    assert forecast.description == "Forecast the weather for one city."
    assert action.parameters["properties"] == {
        "city": {"type": "string", "description": 'The city, e.g. "Oslo".'},
        "days": {"type": "integer", "description": "Days ahead (from Annotated).", "default": 1},
        "units": {
            "type": "string",
            "description": "Unit system: metric or imperial.",
            "default": "metric",
        },
        "detail": {"type": "boolean", "default": False},
    }


def test_annotated_description_wins_over_the_docstring() -> None:
    days = forecast.spec.parameters["properties"]["days"]
    assert days["description"] == "Days ahead (from Annotated)."


def test_description_argument_overrides_the_docstring_summary() -> None:
    def shout(text: str) -> str:
        """Make text loud.

        Args:
            text: What to shout.
        """
        return text.upper()

    tool = expediter.tool(description="Upper-case some text.")(shout)
    [action] = tool.get_actions_metadata()
    assert action.description == "Upper-case some text."
    assert tool.description == "Upper-case some text."
    # Parameter descriptions still come from the docstring.
    assert action.parameters["properties"]["text"]["description"] == "What to shout."


def test_function_without_docstring_has_empty_descriptions() -> None:
    @expediter.tool
    def bare(text: str) -> str:
        return text

    [action] = bare.get_actions_metadata()
    assert action.description == ""
    assert action.parameters["properties"] == {"text": {"type": "string"}}


def test_docstring_entry_for_an_unknown_name_is_ignored() -> None:
    @expediter.tool
    def echo(text: str) -> str:
        """Echo.

        Args:
            text: The text.
            ghost: Not a parameter.
        """
        return text

    assert set(echo.spec.parameters["properties"]) == {"text"}


def test_docstring_entry_for_the_context_parameter_is_not_shown() -> None:
    @expediter.tool
    def whoami(ctx: CallContext) -> str:
        """Say who calls.

        Args:
            ctx: The call.
        """
        return str(ctx.user_id)

    assert whoami.spec.parameters["properties"] == {}


class Notes(Toolbox):
    """Keep short notes.

    Notes live in memory only.
    """

    @expediter.action
    def add(self, text: str, pinned: bool = False) -> str:
        """Add a note.

        Args:
            text: The note's text.
            pinned: Keep it on top.
        """
        return text

    @expediter.action(description="Remove every note.")
    def clear(self) -> None:
        """This docstring summary is overridden."""


def test_toolbox_description_is_the_class_docstring_summary() -> None:
    assert Notes.description == "Keep short notes."


def test_toolbox_action_descriptions_come_from_method_docstrings() -> None:
    actions = {action.name: action for action in Notes().get_actions_metadata(CallContext())}
    assert actions["add"].description == "Add a note."
    assert actions["add"].parameters["properties"] == {
        "text": {"type": "string", "description": "The note's text."},
        "pinned": {"type": "boolean", "description": "Keep it on top.", "default": False},
    }
    assert actions["clear"].description == "Remove every note."


def test_toolbox_subclass_without_docstring_has_empty_description() -> None:
    class MoreNotes(Notes):
        pass

    assert MoreNotes.description == ""


def test_record_description_is_its_docstring_summary_on_one_line() -> None:
    @attrs.frozen
    class Window:
        """A time
        window.

        Details.
        """

        start: str

    @expediter.tool
    def book(slot: Window) -> None:
        return None

    assert book.spec.parameters["$defs"]["Window"]["description"] == "A time window."


def test_one_line_record_docstring_is_its_description() -> None:
    @attrs.frozen
    class Slot:
        """A bookable slot."""

        start: str

    @expediter.tool
    def book(slot: Slot) -> None:
        return None

    assert book.spec.parameters["$defs"]["Slot"]["description"] == "A bookable slot."


# -- Sphinx/reST, NumPy and epydoc styles (docstring-parser) ------------------------------------

REST = """Convert an amount between two currencies
using today's rate.

More detail that is not part of the summary.

:param amount: How much to convert.
:type amount: float
:param str source: The ISO code to convert from,
    e.g. "EUR"; continuation lines are joined.
:param target: The ISO code to convert to.
:keyword rounding: Decimal places.
:returns: The converted amount.
:rtype: float
:raises ValueError: on an unknown currency.
"""

NUMPY = """Convert an amount between two currencies
using today's rate.

More detail that is not part of the summary.

Parameters
----------
amount : float
    How much to convert.
source : str
    The ISO code to convert from,
    e.g. "EUR"; continuation lines are joined.
target, fallback : str, optional
    The ISO code to convert to.
*args
    Ignored positional values.

Other Parameters
----------------
rounding : int
    Decimal places.

Returns
-------
float
    The converted amount.

Raises
------
ValueError
    On an unknown currency.
"""

EPYDOC = """Convert an amount between two currencies
using today's rate.

@param amount: How much to convert.
@type amount: float
@param source: The ISO code to convert from,
    e.g. "EUR"; continuation lines are joined.
@return: The converted amount.
"""

_SUMMARY = "Convert an amount between two currencies using today's rate."
_SOURCE = 'The ISO code to convert from, e.g. "EUR"; continuation lines are joined.'


def test_sphinx_rest_docstring_gives_per_argument_descriptions() -> None:
    assert parse_docstring(REST) == Docstring(
        summary=_SUMMARY,
        arguments={
            "amount": "How much to convert.",
            "source": _SOURCE,
            "target": "The ISO code to convert to.",
            "rounding": "Decimal places.",
        },
    )


def test_numpy_docstring_gives_per_argument_descriptions() -> None:
    assert parse_docstring(NUMPY) == Docstring(
        summary=_SUMMARY,
        arguments={
            "amount": "How much to convert.",
            "source": _SOURCE,
            "target": "The ISO code to convert to.",
            "fallback": "The ISO code to convert to.",
            "args": "Ignored positional values.",
            "rounding": "Decimal places.",
        },
    )


def test_epydoc_docstring_gives_per_argument_descriptions() -> None:
    assert parse_docstring(EPYDOC) == Docstring(
        summary=_SUMMARY,
        arguments={"amount": "How much to convert.", "source": _SOURCE},
    )


def test_google_attributes_are_not_arguments_in_any_style() -> None:
    numpy = "Do it.\n\nAttributes\n----------\nx : int\n    Not one.\n"
    assert parse_docstring(numpy) == Docstring(summary="Do it.", arguments={})
    rest = "Do it.\n\n:ivar x: Not one.\n:param y: The y.\n"
    assert parse_docstring(rest) == Docstring(summary="Do it.", arguments={"y": "The y."})


def test_docstring_opening_with_a_section_in_source_keeps_its_entries() -> None:
    def locate(city: str, country: str) -> str:
        """Args:
        city: Where.
        country: Which country.
        """
        return city

    assert parse_docstring(locate.__doc__) == Docstring(
        summary="", arguments={"city": "Where.", "country": "Which country."}
    )


def test_a_huge_docstring_is_read_only_up_to_a_limit_and_quickly() -> None:
    doc = "Do it.\n\nArgs:\n    x: " + "word (" * 200_000 + "\n"
    parsed = parse_docstring(doc)
    assert parsed.summary == "Do it."


def test_sphinx_function_gives_schema_descriptions() -> None:
    @expediter.tool
    def convert(amount: float, source: str, target: str = "USD") -> float:
        """Convert an amount.

        :param amount: How much to convert.
        :param source: The ISO code to convert from.
        :param target: The ISO code to convert to.
        """
        return amount

    properties = convert.spec.parameters["properties"]
    assert convert.spec.description == "Convert an amount."
    assert properties["amount"]["description"] == "How much to convert."
    assert properties["source"]["description"] == "The ISO code to convert from."
    assert properties["target"]["description"] == "The ISO code to convert to."


def test_numpy_toolbox_action_gives_schema_descriptions() -> None:
    class Converter(Toolbox):
        @expediter.action
        def convert(self, amount: float, source: str) -> float:
            """Convert an amount.

            Parameters
            ----------
            amount : float
                How much to convert.
            source : str
                The ISO code to convert from.
            """
            return amount

    [action] = Converter().get_actions_metadata(CallContext())
    assert action.description == "Convert an amount."
    assert action.parameters["properties"] == {
        "amount": {"type": "number", "description": "How much to convert."},
        "source": {"type": "string", "description": "The ISO code to convert from."},
    }


# -- any style round trips ----------------------------------------------------------------------


def _google_section(entries: dict[str, list[str]], typed: bool) -> list[str]:
    lines = ["Args:"]
    for name, (first, *rest) in entries.items():
        lines.append(f"    {name}{' (int)' if typed else ''}: {first}")
        lines.extend(f"        {more}" for more in rest)
    return lines


def _rest_section(entries: dict[str, list[str]], typed: bool) -> list[str]:
    lines = []
    for name, (first, *rest) in entries.items():
        lines.append(f":param {'int ' if typed else ''}{name}: {first}")
        lines.extend(f"    {more}" for more in rest)
        if typed:
            lines.append(f":type {name}: int")
    return lines


def _numpy_section(entries: dict[str, list[str]], typed: bool) -> list[str]:
    lines = ["Parameters", "----------"]
    for name, texts in entries.items():
        lines.append(f"{name} : int" if typed else name)
        lines.extend(f"    {text}" for text in texts)
    return lines


_STYLES = {"google": _google_section, "rest": _rest_section, "numpy": _numpy_section}
_RETURNS = {
    "google": ["Returns:", "    int: a value."],
    "rest": [":returns: a value."],
    "numpy": ["Returns", "-------", "int", "    A value."],
}


@settings(max_examples=150, deadline=None)
@given(
    style=st.sampled_from(sorted(_STYLES)),
    summary=st.lists(_SENTENCE, min_size=1, max_size=3),
    entries=st.dictionaries(
        _NAME.filter(lambda name: name.isidentifier()),
        st.lists(_SENTENCE, min_size=1, max_size=3),
        min_size=1,
        max_size=5,
    ),
    typed=st.booleans(),
    returns=st.booleans(),
    indent=st.sampled_from(["", "    ", "        "]),
)
def test_every_style_round_trips_summary_and_argument_descriptions(
    style: str,
    summary: list[str],
    entries: dict[str, list[str]],
    typed: bool,
    returns: bool,
    indent: str,
) -> None:
    lines = [*summary, "", *_STYLES[style](entries, typed)]
    if returns:
        lines += ["", *_RETURNS[style]]
    # As written in source: every line after the first indented like the function body.
    doc = lines[0] + "\n" + "\n".join(indent + line if line else "" for line in lines[1:])
    parsed = parse_docstring(doc + "\n" + indent)
    assert parsed.summary == " ".join(summary)
    assert parsed.arguments == {name: " ".join(texts) for name, texts in entries.items()}


def test_parsing_imports_docstring_parser_only_when_a_docstring_can_have_sections() -> None:
    probe = (
        "import sys\n"
        "from expediter.core.authoring.docstrings import parse_docstring\n"
        "assert parse_docstring('Keep short notes.\\n\\nIn memory only.').summary\n"
        "assert 'docstring_parser' not in sys.modules\n"
        "assert parse_docstring('Do it.\\n\\n:param x: The x.').arguments == {'x': 'The x.'}\n"
        "assert 'docstring_parser' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", probe], check=True)


_PACK = '''
import expediter


@expediter.tool
def convert(amount: float) -> float:
    """Convert an amount.

    Args:
        amount: How much.
    """
    return amount
'''

_TOOLS_LIST = """
import json, sys
from expediter.cli import main
sys.argv = ['expediter', 'tools', 'list', '--json']
try:
    main()
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)))
"""


def test_help_and_a_warm_tools_list_do_not_import_docstring_parser(tmp_path: Path) -> None:
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "money.py").write_text(_PACK, encoding="utf-8")
    env = {**os.environ, "EXPEDITER_TOOLS_PATH": str(tools)}

    def modules(code: str) -> set[str]:
        output = subprocess.run(
            [sys.executable, "-c", code], check=True, capture_output=True, text=True, env=env
        ).stdout
        return set(json.loads(output.splitlines()[-1]))

    help_probe = _TOOLS_LIST.replace("'tools', 'list', '--json'", "'--help'")
    modules(_TOOLS_LIST)  # cold: discovers the pack and writes the manifest
    assert "docstring_parser" not in modules(help_probe)
    warm = modules(_TOOLS_LIST)
    assert "docstring_parser" not in warm
    assert not [name for name in warm if name.startswith("_expediter_tools_")]


@pytest.mark.parametrize(
    "doc",
    [
        "Do it.\n\n:param: The nameless one.\n:param x: The x.\n:param y: The y.\n",
        "Do it.\n\n:param x: The x.\n:param a b c: Too many names.\n:param y: The y.\n",
        "Do it.\n\n:param x: The x.\n:returns int value: Too many names.\n:param y: The y.\n",
        "Do it.\n\n:param x: The x.\n:param y: The y.\n:param z",
        "Do it.\n\n@param x: The x.\n@param y: The y.\n@param: The nameless one.\n",
        "Do it.\n\n@param x: The x.\n@param y: The y.\n@param z",
    ],
)
def test_one_malformed_field_does_not_lose_the_other_arguments(doc: str) -> None:
    assert parse_docstring(doc) == Docstring(
        summary="Do it.", arguments={"x": "The x.", "y": "The y."}
    )


@pytest.mark.parametrize("field", [":param {name}: Argument {name}.", "@param {name}: Arg {name}."])
def test_a_field_list_cut_at_the_length_limit_keeps_the_fields_before_the_cut(field: str) -> None:
    lines = [field.format(name=f"p{index}") for index in range(3000)]
    parsed = parse_docstring("Do it.\n\n" + "\n".join(lines) + "\n")
    assert parsed.summary == "Do it."
    assert parsed.arguments["p0"] == field.format(name="p0").partition(": ")[2]
    assert len(parsed.arguments) > 100
