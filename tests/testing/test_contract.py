"""The pytest plugin and ToolContract, used the way a pack author uses them."""

from __future__ import annotations

import pytest

GOOD = '''
import expediter
from expediter.testing import ToolContract


class Weather(expediter.Toolbox):
    """Weather reports."""

    config_fields = [expediter.ConfigField("api_key", secret=True, required=True)]

    @expediter.action
    def forecast(self, city: str, days: int = 1) -> dict:
        """Forecast the weather.

        Args:
            city: The city.
            days: How many days ahead.
        """
        return {"city": city, "days": days, "sky": "clear"}


class TestWeather(ToolContract):
    tool = Weather
    secrets = {"api_key": "weather-test-key"}
    examples = {"forecast": {"city": "Oslo"}}
    require_examples = True


def test_call_tool_fixture(call_tool):
    event = call_tool(Weather, "forecast", {"city": "Rome"}, secrets={"api_key": "k-1234"})
    assert event.result["sky"] == "clear"
'''

BAD = """
import expediter
from expediter.testing import ToolContract


class Sloppy:
    name = "sloppy"

    @expediter.hookimpl
    def get_actions_metadata(self):
        return [expediter.Action("do it", "", {"type": "object",
                "properties": {"x": {"type": "string"}}, "required": ["x", "y"],
                "additionalProperties": False})]

    @expediter.hookimpl
    def execute_action(self, action, arguments):
        raise RuntimeError("always broken")

    @expediter.hookimpl
    def config_requirements(self):
        return [expediter.ConfigField("token", secret=True, default="hunter2")]


class TestSloppy(ToolContract):
    tool = Sloppy()
    examples = {"do it": {"x": "1"}}
"""


def test_a_well_behaved_tool_passes_the_contract(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_weather=GOOD)
    result = pytester.runpytest("-q")
    result.assert_outcomes(passed=8)


def test_the_contract_catches_a_sloppy_tool(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_sloppy=BAD)
    result = pytester.runpytest("-q")
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed") == 4, result.stdout.str()
    assert outcomes.get("passed") == 3
    output = result.stdout.str()
    for message in (
        "must match",
        "required names undeclared parameters",
        "must not have a default",
        "do it failed: RuntimeError: always broken",
    ):
        assert message in output


def test_fixtures_isolate_the_environment(pytester: pytest.Pytester, monkeypatch) -> None:
    monkeypatch.setenv("EXPEDITER_DISABLE_PLUGINS", "everything")
    pytester.makepyfile(
        test_env="""
import os

def test_env(expediter_home):
    assert os.environ["EXPEDITER_HOME"] == str(expediter_home)
    assert "EXPEDITER_DISABLE_PLUGINS" not in os.environ
"""
    )
    pytester.runpytest("-q").assert_outcomes(passed=1)
