"""The hook specifications: every hook is documented, and the hook name lists match the specs."""

from __future__ import annotations

import inspect

import pytest

from expediter.hookspecs import HOST_HOOKS, PROJECT_NAME, TOOL_HOOKS, hookimpl, hookspec
from expediter.hookspecs import host as host_spec
from expediter.hookspecs import tool as tool_spec


def specs(module) -> dict[str, object]:
    return {
        name: value
        for name, value in vars(module).items()
        if inspect.isfunction(value) and hasattr(value, f"{PROJECT_NAME}_spec")
    }


@pytest.mark.parametrize("module", [tool_spec, host_spec], ids=["tool", "host"])
def test_every_hookspec_has_a_one_line_docstring(module) -> None:
    for name, function in specs(module).items():
        doc = inspect.getdoc(function) or ""
        assert doc, f"hook {name} is undocumented"
        assert "\n" not in doc.strip(), f"hook {name}: the docstring must be one line"


def test_hook_name_lists_match_the_specs() -> None:
    assert set(specs(tool_spec)) == set(TOOL_HOOKS)
    assert set(specs(host_spec)) == set(HOST_HOOKS)


def test_markers_use_the_project_name() -> None:
    assert hookspec.project_name == hookimpl.project_name == "expediter"


def test_tool_hooks_are_firstresult_and_broadcast_host_hooks_are_not() -> None:
    for name in TOOL_HOOKS:
        assert getattr(tool_spec, name).expediter_spec["firstresult"] is True
    firstresult = {
        name for name in HOST_HOOKS if getattr(host_spec, name).expediter_spec["firstresult"]
    }
    assert firstresult == {"normalize_result", "resolve_secret"}


def test_every_hook_is_documented_for_its_readers() -> None:
    from pathlib import Path

    docs = Path(__file__).resolve().parents[2] / "docs"
    text = "\n".join(path.read_text(encoding="utf-8") for path in docs.glob("*.md"))
    undocumented = [name for name in (*TOOL_HOOKS, *HOST_HOOKS) if f"`{name}" not in text]
    assert not undocumented, f"hooks missing from docs/: {undocumented}"


def test_no_hook_spec_lives_outside_the_hookspecs_modules() -> None:
    # Every hook a plugin may implement is specified (and so documented) in expediter.hookspecs;
    # the host's own machinery (async wrappers, tracing) adds no hook of its own.
    from pathlib import Path

    package = Path(__file__).resolve().parents[2] / "expediter"
    elsewhere = [
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if "hookspecs" not in path.parts
        and ("@hookspec" in (text := path.read_text(encoding="utf-8")) or "HookspecMarker" in text)
    ]
    assert not elsewhere
