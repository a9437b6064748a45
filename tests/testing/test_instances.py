"""The tool under test configured the way a stored instance is: ``make_host(config=,
secrets=)``, ``call_tool(config=, secrets=)`` and ``ToolContract.config``/``secrets``, with a
real tool whose required field is a secret."""

from __future__ import annotations

import json
import logging
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from expediter.core.host import Host
from expediter.core.instances.keys import generate_key
from expediter.errors import ConfigError

API_KEY = "forecast-KEY-7c1e9a"

#: A tool that cannot work without its secret: its action refuses to run without the key.
FORECASTS = '''
import expediter


class Forecasts(expediter.Toolbox):
    """Weather forecasts from a paid API."""

    config_fields = (
        expediter.ConfigField("api_key", secret=True, required=True, description="The API key."),
        expediter.ConfigField("units", enum=["metric", "imperial"], default="metric"),
        expediter.ConfigField("days", type="integer", default=1),
    )

    @expediter.action
    def forecast(self, city: str, context: expediter.CallContext) -> dict:
        """Forecast the weather.

        Args:
            city: The city.
        """
        key = context.secret("api_key")
        if not key or self.config.get("api_key") != key:
            raise expediter.ToolError("no API key: configure the instance's api_key")
        return {
            "city": city,
            "units": self.config.get("units", "metric"),
            "days": self.config.get("days", 1),
            "authorization": "Bearer " + key,
            "key_length": len(key),
        }
'''


def _forecasts() -> type:
    module = types.ModuleType("forecasts_tool")
    exec(compile(FORECASTS, "forecasts_tool.py", "exec"), module.__dict__)
    tool: type = module.Forecasts
    return tool


Forecasts = _forecasts()


def _no_key(*texts: str) -> None:
    for text in texts:
        assert API_KEY not in text


# --- call_tool and make_host -------------------------------------------------------------------


def test_call_tool_runs_the_tool_with_its_configuration_and_secret(call_tool: Any) -> None:
    event = call_tool(
        Forecasts, "forecast", {"city": "Oslo"}, config={"units": "imperial"},
        secrets={"api_key": API_KEY},
    )  # fmt: skip
    assert event.status == "completed", event.error
    assert event.result["units"] == "imperial"
    assert event.result["key_length"] == len(API_KEY)  # the tool had the real key
    assert event.result["authorization"] == "Bearer ***"
    _no_key(json.dumps(event.to_dict()), repr(event))


def test_a_secret_field_may_be_a_key_of_config(call_tool: Any) -> None:
    event = call_tool(Forecasts, "forecast", {"city": "Oslo"}, config={"api_key": API_KEY})
    assert event.status == "completed", event.error
    _no_key(json.dumps(event.to_dict()))


def test_the_secret_stays_out_of_events_ledger_logs_and_the_database(
    make_host: Callable[..., Host], caplog: pytest.LogCaptureFixture, expediter_home: Path
) -> None:
    caplog.set_level(logging.DEBUG)
    host = make_host(Forecasts, config={"days": 3}, secrets={"api_key": API_KEY})
    assert host.record_calls
    (instance,) = host.instances.list()
    assert instance.tool == "forecasts"
    assert instance.to_dict()["config"] == {"days": 3, "api_key": "***"}
    event = host.call(instance.id, "forecast", {"city": "Lima"}, user_id="alice")
    assert event.status == "completed", event.error
    assert event.result["days"] == 3
    refused = host.call(instance.id, "forecast", {"city": API_KEY, "extra": API_KEY})
    assert refused.error_type == "ArgumentError"
    rows = [host.ledger.get(event.key), host.ledger.get(refused.key)]
    assert all(row is not None for row in rows)
    _no_key(
        json.dumps([event.to_dict(), refused.to_dict()]),
        json.dumps([row.to_dict() for row in rows if row is not None]),
        caplog.text,
    )
    assert "forecast" in caplog.text  # the logs did see the call
    host.close()
    for path in expediter_home.rglob("*"):
        if path.is_file():
            assert API_KEY.encode() not in path.read_bytes(), path


def test_call_tool_without_the_required_secret_says_to_configure_it(call_tool: Any) -> None:
    with pytest.raises(ConfigError, match=r"config=.*secrets=") as refused:
        call_tool(Forecasts, "forecast", {"city": "Oslo"})
    assert "needs configuration field 'api_key'" in str(refused.value)
    assert refused.value.parameter == "api_key"
    with pytest.raises(ConfigError, match="needs configuration field 'api_key'"):
        call_tool(Forecasts, "forecast", {"city": "Oslo"}, config={"units": "metric"})


@pytest.fixture
def operator_host(
    make_host: Callable[..., Host], monkeypatch: pytest.MonkeyPatch
) -> Callable[[], Host]:
    """A recording host with a master key, where the operator adds instances by hand."""

    def make() -> Host:
        monkeypatch.setenv("EXPEDITER_SECRET_KEYS", generate_key())
        return make_host(Forecasts, record_calls=True)

    return make


@pytest.mark.parametrize(
    "bad",
    [{"proxy": "http://proxy.example"}, {"days": "three"}, {"units": "kelvin"}],
    ids=["unknown-field", "wrong-type", "not-in-enum"],
)
def test_bad_configuration_is_refused_as_instances_add_refuses_it(
    bad: dict[str, Any],
    make_host: Callable[..., Host],
    call_tool: Any,
    operator_host: Callable[[], Host],
) -> None:
    with pytest.raises(ConfigError) as by_the_operator:
        operator_host().instances.add(
            "forecasts", config={**bad, "api_key": API_KEY}, operator=True
        )
    expected = by_the_operator.value
    with pytest.raises(ConfigError) as by_make_host:
        make_host(Forecasts, config=bad, secrets={"api_key": API_KEY})
    with pytest.raises(ConfigError) as by_call_tool:
        call_tool(Forecasts, "forecast", {"city": "x"}, config=bad, secrets={"api_key": API_KEY})
    for refused in (by_make_host.value, by_call_tool.value):
        assert str(refused) == str(expected)
        assert refused.parameter == expected.parameter == next(iter(bad))
        _no_key(str(refused))


def test_secrets_hold_only_secret_fields_given_once(make_host: Callable[..., Host]) -> None:
    with pytest.raises(ConfigError, match="'units' is not secret") as plain:
        make_host(Forecasts, secrets={"api_key": API_KEY, "units": "metric"})
    assert plain.value.parameter == "units"
    with pytest.raises(ConfigError, match="both in config and in secrets; give it once"):
        make_host(Forecasts, config={"api_key": API_KEY}, secrets={"api_key": API_KEY})
    with pytest.raises(ConfigError, match="secrets must be a mapping"):
        make_host(Forecasts, secrets=[("api_key", API_KEY)])


def test_each_configured_host_holds_its_own_instance_under_the_tests_key(
    make_host: Callable[..., Host], call_tool: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ValueError, match="leave out record_calls=False"):
        make_host(Forecasts, secrets={"api_key": API_KEY}, record_calls=False)
    first = make_host(Forecasts, config={"days": 1}, secrets={"api_key": API_KEY})
    second = make_host(Forecasts, config={"days": 2}, secrets={"api_key": API_KEY})
    assert first.config.secret_keys
    assert first.config.secret_keys == second.config.secret_keys
    assert first.database_url != second.database_url
    assert [item.config["days"] for item in first.instances.list()] == [1]
    assert [item.config["days"] for item in second.instances.list()] == [2]
    for days in (3, 4):  # one test, several configurations
        event = call_tool(Forecasts, "forecast", {"city": "x"}, config={"days": days},
                          secrets={"api_key": API_KEY})  # fmt: skip
        assert event.result["days"] == days, event.error
    # A key the test set itself is the one used.
    mine = generate_key()
    monkeypatch.setenv("EXPEDITER_SECRET_KEYS", mine)
    assert make_host(Forecasts, secrets={"api_key": API_KEY}).config.secret_keys == mine


def test_a_configuration_needs_exactly_one_tool(make_host: Callable[..., Host]) -> None:
    import expediter

    @expediter.tool
    def other() -> str:
        """Another tool."""
        return "x"

    with pytest.raises(AssertionError, match=r"got 2 \(forecasts, other\)"):
        make_host(Forecasts, other, secrets={"api_key": API_KEY})


# --- ToolContract ------------------------------------------------------------------------------

CONFIGURED_CONTRACT = """
import pytest

from expediter.testing import ToolContract
from forecasts_tool import Forecasts

KEY = "contract-KEY-0b5d22"


class TestForecasts(ToolContract):
    tool = Forecasts
    config = {"units": "imperial"}
    secrets = {"api_key": KEY}
    examples = {"forecast": {"city": "Oslo"}}
    require_examples = True

    def test_the_calls_use_the_stored_instance(self, contract_host, contract_target):
        (instance,) = contract_host.instances.list()
        assert contract_target == instance.id
        event = contract_host.call(contract_target, "forecast", {"city": "Bergen"})
        assert event.result["units"] == "imperial"
        assert KEY not in str(event.to_dict())


class TestFromAFixture(ToolContract):
    tool = Forecasts
    examples = {"forecast": {"city": "Oslo"}}

    @pytest.fixture
    def contract_config(self, tmp_path):
        return {"days": len(tmp_path.name)}

    @pytest.fixture
    def contract_secrets(self):
        return {"api_key": KEY}

    def test_the_fixtures_configure_it(self, contract_host, contract_target, tmp_path):
        event = contract_host.call(contract_target, "forecast", {"city": "Bergen"})
        assert event.result["days"] == len(tmp_path.name)
"""


def _run(pytester: pytest.Pytester, contract: str) -> pytest.RunResult:
    pytester.makepyfile(forecasts_tool=FORECASTS, test_forecasts=contract)
    return pytester.runpytest("-q", "-p", "no:cacheprovider")


def test_a_configured_tool_passes_the_contract(pytester: pytest.Pytester) -> None:
    result = _run(pytester, CONFIGURED_CONTRACT)
    result.assert_outcomes(passed=16)


def test_the_contract_says_to_set_config_when_the_secret_is_missing(
    pytester: pytest.Pytester,
) -> None:
    contract = """
from expediter.testing import ToolContract
from forecasts_tool import Forecasts


class TestForecasts(ToolContract):
    tool = Forecasts
    examples = {"forecast": {"city": "Oslo"}}
"""
    result = _run(pytester, contract)
    outcomes = result.parseoutcomes()
    assert not outcomes.get("passed"), result.stdout.str()
    assert outcomes.get("errors") == 7, result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "*tool 'forecasts' needs configuration field 'api_key': The API key. Set "
            "TestForecasts.config (secret fields in TestForecasts.secrets)*"
        ]
    )


def test_the_contract_refuses_configuration_instances_add_refuses(
    pytester: pytest.Pytester,
) -> None:
    contract = """
from expediter.testing import ToolContract
from forecasts_tool import Forecasts


class TestForecasts(ToolContract):
    tool = Forecasts
    config = {"units": "kelvin"}
    secrets = {"api_key": "contract-KEY-0b5d22"}
"""
    result = _run(pytester, contract)
    assert result.parseoutcomes().get("errors") == 7, result.stdout.str()
    result.stdout.fnmatch_lines(
        ["*configuration field 'units' must be one of 'metric', 'imperial', not 'kelvin'*"]
    )
    assert "contract-KEY-0b5d22" not in result.stdout.str()


def test_a_pytester_run_leaves_the_host_libraries_usable(pytester: pytest.Pytester) -> None:
    # A fresh process, so nothing imported the libraries before the in-process run.
    outer = '''
pytest_plugins = ["pytester"]

from forecasts_tool import Forecasts

INNER = """
from forecasts_tool import Forecasts

def test_inner(call_tool):
    event = call_tool(Forecasts, "forecast", {"city": "a"}, secrets={"api_key": "key-1234"})
    assert event.status == "completed"
"""


def test_outer(pytester, call_tool):
    import pathlib

    tool = pathlib.Path(__file__).with_name("forecasts_tool.py").read_text()
    pytester.makepyfile(forecasts_tool=tool)
    pytester.makepyfile(test_inner=INNER)
    pytester.runpytest("-q", "-p", "no:cacheprovider").assert_outcomes(passed=1)
    event = call_tool(Forecasts, "forecast", {"city": "b"}, secrets={"api_key": "key-1234"})
    assert event.status == "completed", event.error
'''
    pytester.makepyfile(forecasts_tool=FORECASTS, test_outer=outer)
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
