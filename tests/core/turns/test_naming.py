"""Offered function names (``core/naming.py``): valid, unique, deterministic, reversible."""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import expediter
from expediter.core.instances.defaults import default_instance_id
from expediter.core.turns.naming import NAME_PATTERN, NameMap, assign_names, sanitize
from expediter.hookspecs.tool import Action, CallContext

#: What OpenAI, Anthropic and Gemini all accept, spelled out here rather than imported.
VALID = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_-]{0,63}$")
LIMIT = 64

Target = tuple[str, str, str, str, bool]

# -- strategies ---------------------------------------------------------------------------------

_ALPHABET = st.sampled_from([*"ab", *"09", *".:/ -_", "é", "ß", "日", "\u200b"])
_WORDS = st.sampled_from(
    [
        "search",
        "Search",
        "web",
        "weather",
        "weather_search",
        "web_search",
        "docs",
        "",
        "3d",
        "a.b/c d:e",
        "a_b_c_d_e",
        "_",
        "-",
        "日本",
    ]
)
#: Long names sharing their first 60+ characters, so only the end tells them apart.
_LONG = st.builds(
    lambda stem, tail: stem + tail,
    st.sampled_from(["x" * 60, "search_" * 9, "日" * 70, "a.b/" * 20]),
    st.text(_ALPHABET, max_size=4),
)
_NAME = st.one_of(_WORDS, st.text(_ALPHABET, max_size=6), _LONG, st.text(max_size=8))

_INSTANCE = st.tuples(
    _NAME,  # instance id
    _NAME,  # display name
    st.sampled_from(["mcp", "github", "client"]),  # tool type
    st.lists(_NAME, unique=True, max_size=4),  # action names
    st.booleans(),  # client-side
)


@st.composite
def target_sets(draw: st.DrawFn) -> list[Target]:
    """Targets of one turn: instance ids are unique, an instance's action names are unique."""
    instances = draw(st.lists(_INSTANCE, unique_by=lambda item: item[0], max_size=6))
    return [
        (instance_id, display, tool, action, client)
        for instance_id, display, tool, actions, client in instances
        for action in actions
    ]


_SETTINGS = settings(max_examples=60, deadline=None)

# -- oracles ------------------------------------------------------------------------------------


def bare(text: str) -> str:
    """The sanitized name the spec describes: outside characters -> ``_``, no leading digit."""
    cleaned = re.sub(r"[^a-zA-Z0-9_-]", "_", text)
    return cleaned if re.match(r"[a-zA-Z_]", cleaned) else "_" + cleaned


def is_cut(name: str, full: str) -> bool:
    """``name`` is ``full`` cut to 64 characters with a short hash at the end."""
    return (
        len(name) == LIMIT
        and name[:50] == full[:50]
        and re.search(r"_[0-9a-f]{6,}\d*$", name) is not None
    )


def split_suffix(name: str) -> tuple[str, str] | None:
    """``(head, suffix)`` for a name of the form ``head_<short hex suffix>``."""
    match = re.fullmatch(r"(.*)_([0-9a-f]{6,}\d*)", name)
    return None if match is None else (match.group(1), match.group(2))


def shared_bases(targets: list[Target]) -> Counter[str]:
    return Counter(bare(action) for _, _, _, action, _ in targets)


# -- properties ---------------------------------------------------------------------------------


@_SETTINGS
@given(target_sets())
def test_every_offered_name_is_valid_for_every_provider(targets: list[Target]) -> None:
    names = assign_names(targets).names
    assert all(VALID.match(name) for name in names), names
    assert all(NAME_PATTERN.match(name) for name in names)


@_SETTINGS
@given(target_sets())
def test_offered_names_are_unique_in_the_turn(targets: list[Target]) -> None:
    names = assign_names(targets).names
    assert len(names) == len(targets)
    assert len(set(names)) == len(names)


@_SETTINGS
@given(st.data())
def test_the_same_set_of_targets_in_any_order_yields_the_same_map(data: st.DataObject) -> None:
    targets = data.draw(target_sets())
    shuffled = data.draw(st.permutations(targets))
    repeated = shuffled + data.draw(
        st.lists(st.sampled_from(targets), max_size=3) if targets else st.just([])
    )
    first = assign_names(targets)
    assert assign_names(shuffled) == first
    assert assign_names(repeated) == first
    assert assign_names(shuffled).to_dict() == first.to_dict()


@_SETTINGS
@given(target_sets())
def test_the_reverse_map_survives_to_dict_and_from_dict(targets: list[Target]) -> None:
    name_map = assign_names(targets)
    restored = NameMap.from_dict(json.loads(json.dumps(name_map.to_dict())))
    assert restored == name_map
    for instance_id, _, _, action, _ in targets:
        name = name_map.name_for(instance_id, action)
        assert restored.name_for(instance_id, action) == name
        assert name is not None
        assert restored.resolve(name) == name_map.resolve(name)


@_SETTINGS
@given(target_sets())
def test_every_target_has_exactly_one_name_that_resolves_back_to_it(
    targets: list[Target],
) -> None:
    name_map = assign_names(targets)
    assert len(name_map) == len(targets)
    per_target = Counter((entry.instance_id, entry.action) for entry in name_map.entries)
    assert all(count == 1 for count in per_target.values())
    for instance_id, _, tool, action, client in targets:
        name = name_map.name_for(instance_id, action)
        assert name is not None
        assert name in name_map
        entry = name_map.resolve(name)
        assert entry is not None
        assert (entry.name, entry.instance_id, entry.tool, entry.action, entry.client) == (
            name,
            instance_id,
            tool,
            action,
            client,
        )
    assert name_map.resolve("") is None
    assert name_map.resolve("not offered!") is None


@_SETTINGS
@given(target_sets())
def test_an_action_unique_in_the_turn_keeps_its_bare_name(targets: list[Target]) -> None:
    name_map = assign_names(targets)
    counts = shared_bases(targets)
    for instance_id, _, _, action, _ in targets:
        base = bare(action)
        if counts[base] != 1:
            continue
        name = name_map.name_for(instance_id, action)
        assert name is not None
        if len(base) <= LIMIT:
            assert name == base
        else:
            assert is_cut(name, base), (name, base)


@_SETTINGS
@given(target_sets())
def test_a_generated_name_never_takes_a_name_a_unique_action_has(targets: list[Target]) -> None:
    name_map = assign_names(targets)
    counts = shared_bases(targets)
    unique_names = {
        name_map.name_for(instance_id, action)
        for instance_id, _, _, action, _ in targets
        if counts[bare(action)] == 1
    }
    unique_bases = {bare(action) for *_, action, _ in targets if counts[bare(action)] == 1}
    generated = {
        name_map.name_for(instance_id, action)
        for instance_id, _, _, action, _ in targets
        if counts[bare(action)] > 1
    }
    assert not generated & unique_names
    assert not generated & unique_bases


@_SETTINGS
@given(target_sets())
def test_a_shared_name_is_prefixed_by_the_instance_display_name(targets: list[Target]) -> None:
    name_map = assign_names(targets)
    counts = shared_bases(targets)
    unique_bases = {bare(a) for *_, a, _ in targets if counts[bare(a)] == 1}
    by_prefixed: dict[str, list[str]] = defaultdict(list)
    for instance_id, display, _, action, _ in targets:
        if counts[bare(action)] == 1:
            continue
        name = name_map.name_for(instance_id, action)
        assert name is not None
        prefixed = f"{bare(display)}_{bare(action)}"
        if len(prefixed) > LIMIT:
            assert len(name) == LIMIT
            assert name[:50] == prefixed[:50], (name, prefixed)
            continue
        by_prefixed[prefixed].append(name)
        if name != prefixed:
            parts = split_suffix(name)
            assert parts is not None, (name, prefixed)
            head, suffix = parts
            assert len(suffix) <= 12, "a suffix that tells names apart stays short"
            assert head == prefixed[: LIMIT - len(suffix) - 1], (name, prefixed)
    for prefixed, names in by_prefixed.items():
        if prefixed not in unique_bases:
            # The first claimant gets the prefixed name itself; only the others get a suffix.
            assert names.count(prefixed) == 1, (prefixed, names)


@_SETTINGS
@given(
    st.text(_ALPHABET, min_size=LIMIT + 1, max_size=90),
    st.lists(st.text(_ALPHABET, min_size=1, max_size=3), min_size=2, max_size=4, unique=True),
)
def test_long_names_differing_only_at_the_end_stay_distinct(stem: str, tails: list[str]) -> None:
    targets = [("i", "inst", "mcp", stem + tail, False) for tail in tails]
    bases = [bare(stem + tail) for tail in tails]
    name_map = assign_names(targets)
    names = [name_map.name_for("i", stem + tail) for tail in tails]
    assert len(set(names)) == len(names)
    for name, base in zip(names, bases, strict=True):
        assert name is not None
        assert len(name) == LIMIT
        if len(set(bases)) == len(bases):
            assert is_cut(name, base), (name, base)


# -- examples -----------------------------------------------------------------------------------


def names_of(targets: list[tuple[str, str, str, str]]) -> dict[tuple[str, str], str | None]:
    name_map = assign_names(targets)
    return {(t[0], t[3]): name_map.name_for(t[0], t[3]) for t in targets}


def test_two_mcp_servers_offering_search_are_told_apart_by_their_display_names() -> None:
    names = names_of(
        [
            ("srv-1", "docs", "mcp", "search"),
            ("srv-2", "jira", "mcp", "search"),
        ]
    )
    assert names == {("srv-1", "search"): "docs_search", ("srv-2", "search"): "jira_search"}
    assert "search_1" not in names.values()
    assert "mcp_search" not in names.values()


def test_a_unique_action_keeps_its_bare_name_next_to_shared_ones() -> None:
    names = names_of(
        [
            ("srv-1", "docs", "mcp", "search"),
            ("srv-1", "docs", "mcp", "fetch_page"),
            ("srv-2", "jira", "mcp", "search"),
            ("srv-2", "jira", "mcp", "create_issue"),
        ]
    )
    assert names[("srv-1", "fetch_page")] == "fetch_page"
    assert names[("srv-2", "create_issue")] == "create_issue"


def test_a_prefixed_name_never_takes_an_action_literally_named_like_it() -> None:
    names = names_of(
        [
            ("w1", "weather", "mcp", "search"),
            ("w2", "web", "mcp", "search"),
            ("w3", "forecasts", "mcp", "weather_search"),
        ]
    )
    assert names[("w3", "weather_search")] == "weather_search"
    assert names[("w2", "search")] == "web_search"
    weather = names[("w1", "search")]
    assert weather is not None
    assert re.fullmatch(r"weather_search_[0-9a-f]{6}", weather)


def test_two_instances_with_the_same_display_name_get_a_short_stable_suffix() -> None:
    targets = [("gh-work", "github", "github", "search"), ("gh-home", "github", "github", "search")]
    first = names_of(targets)
    assert names_of(list(reversed(targets))) == first
    assert None not in first.values()
    plain = [name for name in first.values() if name == "github_search"]
    suffixed = [name for name in first.values() if name != "github_search"]
    assert len(plain) == 1
    assert len(suffixed) == 1
    assert re.fullmatch(r"github_search_[0-9a-f]{6}", suffixed[0] or "")


def test_characters_outside_the_allowed_set_become_underscores() -> None:
    assert sanitize("a.b/c d:e") == "a_b_c_d_e"
    assert names_of([("i", "x", "mcp", "a.b/c d:e")]) == {("i", "a.b/c d:e"): "a_b_c_d_e"}


def test_a_name_starting_with_a_digit_or_dash_gets_a_leading_underscore() -> None:
    assert sanitize("3d") == "_3d"
    assert sanitize("-x") == "_-x"
    assert names_of([("i", "x", "mcp", "3d")]) == {("i", "3d"): "_3d"}


@pytest.mark.parametrize(("action", "expected"), [("", "_"), ("日本", "__"), ("é", "_")])
def test_an_empty_or_non_ascii_name_still_yields_a_valid_name(action: str, expected: str) -> None:
    assert names_of([("i", "x", "mcp", action)]) == {("i", action): expected}


def test_two_actions_that_sanitize_alike_on_one_instance_stay_distinct() -> None:
    names = names_of([("i", "files", "mcp", "a.b"), ("i", "files", "mcp", "a/b")])
    assert len(set(names.values())) == 2
    assert all(name and name.startswith("files_a_b") for name in names.values())


def test_a_long_name_is_cut_to_64_characters_with_a_hash_suffix() -> None:
    action = "summarize_" * 10
    (name,) = names_of([("i", "x", "mcp", action)]).values()
    assert name is not None
    assert len(name) == LIMIT
    assert name.startswith(action[:55])
    assert re.fullmatch(r"[0-9a-f]{8}", name[56:])
    assert names_of([("other", "y", "mcp", action)])[("other", action)] == name


def test_long_names_that_share_their_first_64_characters_stay_distinct() -> None:
    stem = "x" * 70
    names = names_of([("i", "x", "mcp", stem + "a"), ("i", "x", "mcp", stem + "b")])
    first, second = names.values()
    assert first != second
    assert all(name and len(name) == LIMIT and VALID.match(name) for name in (first, second))


def test_the_reverse_map_is_plain_json_and_keeps_the_client_flag() -> None:
    name_map = assign_names(
        [("client:pick", "client", "client", "pick", True), ("i", "x", "mcp", "search")]
    )
    data = json.loads(json.dumps(name_map.to_dict()))
    assert data["names"]["pick"] == {
        "instance_id": "client:pick",
        "tool": "client",
        "action": "pick",
        "client": True,
    }
    restored = NameMap.from_dict(data)
    entry = restored.resolve("pick")
    assert entry is not None
    assert entry.client


def test_a_name_never_offered_resolves_to_nothing() -> None:
    name_map = assign_names(
        [("srv-1", "docs", "mcp", "search"), ("srv-2", "jira", "mcp", "search")]
    )
    assert name_map.resolve("search") is None
    assert name_map.resolve("mcp_search") is None
    assert name_map.name_for("srv-3", "search") is None
    assert name_map.name_for("srv-1", "fetch") is None


# -- through a real host ------------------------------------------------------------------------


class Searcher:
    """A tool offering ``search`` plus one action of its own."""

    def __init__(self, name: str, own: str) -> None:
        self.name = name
        self.own = own

    @expediter.hookimpl
    def get_actions_metadata(self) -> list[Action]:
        return [Action("search", "Search."), Action(self.own, "Its own action.")]

    @expediter.hookimpl
    def execute_action(self, action: str, arguments: dict[str, Any], context: CallContext) -> Any:
        return {"action": action}


def test_a_host_prefixes_shared_actions_by_tool_and_keeps_unique_ones_bare(make_host) -> None:
    host = make_host(Searcher("tool_a", "fetch"), Searcher("tool_b", "post"))
    toolset = host.toolset()
    assert sorted(toolset.name_map.names) == ["fetch", "post", "tool_a_search", "tool_b_search"]
    for name, tool, action in [
        ("tool_a_search", "tool_a", "search"),
        ("tool_b_search", "tool_b", "search"),
        ("fetch", "tool_a", "fetch"),
        ("post", "tool_b", "post"),
    ]:
        entry = toolset.name_map.resolve(name)
        assert entry is not None
        assert (entry.tool, entry.action) == (tool, action)
    offered = [schema["function"]["name"] for schema in toolset.schemas("openai")]
    assert sorted(offered) == sorted(toolset.name_map.names)


def test_a_host_prefixes_instances_of_one_tool_by_their_display_names(make_host) -> None:
    host = make_host(Searcher("mcp", "fetch"))
    toolset = host.toolset(
        instances=[
            {"tool": "mcp", "instance_id": "srv-1", "name": "docs"},
            {"tool": "mcp", "instance_id": "srv-2", "name": "jira"},
        ]
    )
    assert toolset.errors == []
    name_map = toolset.name_map
    assert name_map.name_for("srv-1", "search") == "docs_search"
    assert name_map.name_for("srv-2", "search") == "jira_search"
    assert name_map.name_for("srv-1", "fetch") == "docs_fetch"
    assert name_map.name_for(default_instance_id("mcp"), "search") == "mcp_search"
    assert all(not name.endswith("_1") for name in name_map.names)
    assert (
        host.toolset(
            instances=[
                {"tool": "mcp", "instance_id": "srv-2", "name": "jira"},
                {"tool": "mcp", "instance_id": "srv-1", "name": "docs"},
            ]
        ).name_map.to_dict()
        == name_map.to_dict()
    )
