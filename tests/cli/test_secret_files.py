"""`--secret FIELD=@PATH` and `FIELD=-` for fields that are not text: an object or an array
secret (credentials by scheme, scopes) read from a file or standard input as JSON, checked
against the field's type, and refused with the file and line, never the content; and a
master key too regular to be secret refused by the commands."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from expediter.cli import cli
from expediter.core.host import Host
from expediter.core.instances.keys import generate_key

VAULT = '''
import expediter


class Vault(expediter.Toolbox):
    """Signs in with structured credentials."""

    name = "vault"
    config_fields = [
        expediter.ConfigField("credentials", type="object", secret=True, required=True),
        expediter.ConfigField("scopes", type="array", secret=True),
        expediter.ConfigField("pin", type="integer", secret=True),
        expediter.ConfigField("label", secret=True),
    ]

    @expediter.action
    def whoami(self) -> dict:
        """The shape of the stored secrets (never their values)."""
        config = self.config
        return {
            "credential_names": sorted(config["credentials"]),
            "scopes": len(config.get("scopes") or []),
            "pin_is_int": isinstance(config.get("pin"), int),
        }
'''
#: The values the tests store; none of them may appear in any output.
CREDENTIALS = {"user": "svc-robot", "password": "pw-SECRET-4242", "otp_seed": "SEED-SECRET-77"}
Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def tools_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("EXPEDITER_SECRET_KEYS", generate_key())
    monkeypatch.setenv("EXPEDITER_DISABLE_PLUGIN_AUTOLOAD", "1")
    for variable in ("EXPEDITER_SECRET_KEYS_FILE", "EXPEDITER_DEFAULT_TOOLS"):
        monkeypatch.delenv(variable, raising=False)
    directory = tmp_path / "tools"
    directory.mkdir()
    (directory / "vault.py").write_text(textwrap.dedent(VAULT))
    return directory


@pytest.fixture
def expediter(tools_dir: Path) -> Run:
    """`expediter --tools-dir TOOLS ARGS`: exit code, standard output, standard error."""

    def run(
        *args: str, env: dict[str, str | None] | None = None, stdin: str | None = None
    ) -> tuple[int, str, str]:
        result = CliRunner().invoke(
            cli, ["--tools-dir", str(tools_dir), *args], prog_name="expediter", env=env, input=stdin
        )
        if result.exception and not isinstance(result.exception, SystemExit):
            raise result.exception
        return result.exit_code, result.stdout, result.stderr

    return run


@pytest.fixture
def secrets_of(tools_dir: Path) -> Iterator[Callable[[str], dict[str, object]]]:
    """The decrypted secrets of a stored instance, read by a host of its own."""
    hosts: list[Host] = []

    def read(instance_id: str) -> dict[str, object]:
        hosts.append(Host(tools_path=[tools_dir]))
        return dict(hosts[-1].instances.get(instance_id, decrypt=True).secrets or {})

    yield read
    for host in hosts:
        host.close()


def add(expediter: Run, *options: str, stdin: str | None = None) -> str:
    code, out, err = expediter("instances", "add", "vault", "--name", "v", *options, stdin=stdin)
    assert code == 0, err
    return out.strip()


def assert_no_secret(*texts: str) -> None:
    for text in texts:
        for value in CREDENTIALS.values():
            assert value not in text


def test_an_object_secret_is_read_from_a_json_file(
    expediter: Run, secrets_of: Callable[[str], dict[str, object]], tmp_path: Path
) -> None:
    creds = tmp_path / "creds.json"
    creds.write_text(json.dumps(CREDENTIALS, indent=2) + "\n")
    scopes = tmp_path / "scopes.json"
    scopes.write_text('["read", "write"]')
    instance_id = add(
        expediter, "--secret", f"credentials=@{creds}", "--secret", f"scopes=@{scopes}",
        "--secret", "pin=1234", "--secret", f"label=@{scopes}",
    )  # fmt: skip
    assert secrets_of(instance_id) == {
        "credentials": CREDENTIALS,
        "scopes": ["read", "write"],
        "pin": 1234,
        "label": '["read", "write"]',  # a string field takes the file's text as it is
    }
    code, out, err = expediter("call", instance_id, "whoami")
    assert code == 0, err
    assert json.loads(out) == {
        "credential_names": ["otp_seed", "password", "user"],
        "scopes": 2,
        "pin_is_int": True,
    }
    assert_no_secret(out, err)


def test_an_object_secret_is_read_from_standard_input(
    expediter: Run, secrets_of: Callable[[str], dict[str, object]]
) -> None:
    instance_id = add(expediter, "--secret", "credentials=-", stdin=json.dumps(CREDENTIALS))
    assert secrets_of(instance_id) == {"credentials": CREDENTIALS}


def test_set_replaces_an_object_secret_from_a_file(
    expediter: Run, secrets_of: Callable[[str], dict[str, object]], tmp_path: Path
) -> None:
    # The documented way to change an http instance's credentials (docs/operations.md).
    instance_id = add(expediter, "--secret", 'credentials={"user": "first"}')
    creds = tmp_path / "creds.json"
    creds.write_text(json.dumps(CREDENTIALS))
    code, _, err = expediter("instances", "set", instance_id, "--secret", f"credentials=@{creds}")
    assert code == 0, err
    assert secrets_of(instance_id) == {"credentials": CREDENTIALS}
    code, _, err = expediter("instances", "set", instance_id, "--secret", "scopes=-", stdin="[1]")
    assert code == 0, err
    assert secrets_of(instance_id) == {"credentials": CREDENTIALS, "scopes": [1]}


def test_invalid_json_in_a_file_names_the_file_and_line_never_the_content(
    expediter: Run, tmp_path: Path
) -> None:
    creds = tmp_path / "creds.json"
    lines = [f'  "{name}": "{value}"' for name, value in CREDENTIALS.items()]
    creds.write_text("{\n" + "\n".join(lines) + "\n}\n")  # no commas between the members
    code, out, err = expediter("instances", "add", "vault", "--name", "v",
                               "--secret", f"credentials=@{creds}")  # fmt: skip
    assert (code, out) == (2, "")
    assert str(creds) in err
    assert "'credentials'" in err
    assert "not valid JSON" in err
    assert "line 3" in err
    assert_no_secret(err)


def test_invalid_json_on_standard_input_is_named_as_such(expediter: Run) -> None:
    text = "\n" + json.dumps(CREDENTIALS)[:-1]  # the closing brace is missing
    code, out, err = expediter(
        "instances", "add", "vault", "--name", "v", "--secret", "credentials=-", stdin=text
    )
    assert (code, out) == (2, "")
    assert "standard input" in err
    assert "not valid JSON" in err
    assert "line 2" in err
    assert_no_secret(err)


def test_a_missing_file_is_named(expediter: Run, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-creds.json"
    code, out, err = expediter("instances", "add", "vault", "--name", "v",
                               "--secret", f"credentials=@{missing}")  # fmt: skip
    assert (code, out) == (2, "")
    assert "cannot read the file" in err
    assert str(missing) in err
    assert "'credentials'" in err


@pytest.mark.parametrize(
    ("field", "content", "given", "wanted"),
    [
        ("credentials", json.dumps(list(CREDENTIALS.values())), "an array", "an object"),
        ("credentials", json.dumps(CREDENTIALS["password"]), "a string", "an object"),
        ("scopes", json.dumps(CREDENTIALS), "an object", "an array"),
        ("pin", "12.5", "a number", "an integer"),
    ],
    ids=["array-for-object", "string-for-object", "object-for-array", "number-for-integer"],
)
def test_json_of_the_wrong_type_names_both_types_never_the_content(
    expediter: Run, tmp_path: Path, field: str, content: str, given: str, wanted: str
) -> None:
    path = tmp_path / "value.json"
    path.write_text(content)
    options = ["--secret", f"{field}=@{path}"]
    if field != "credentials":
        options += ["--secret", 'credentials={"user": "u"}']
    code, out, err = expediter("instances", "add", "vault", "--name", "v", *options)
    assert (code, out) == (2, "")
    assert str(path) in err
    assert f"holds {given}" in err
    assert f"'{field}' takes {wanted}" in err
    assert_no_secret(err)


def test_a_too_regular_master_key_is_refused_with_how_to_make_one(expediter: Run) -> None:
    weak = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAE="  # 31 zero bytes and a 1
    code, out, err = expediter(
        "instances", "add", "vault", "--name", "v", "--secret", 'credentials={"user": "u"}',
        env={"EXPEDITER_SECRET_KEYS": weak},
    )  # fmt: skip
    assert (code, out) == (1, "")
    assert "key 1 in EXPEDITER_SECRET_KEYS is too regular" in err
    assert "`expediter keys generate`" in err
    assert weak not in err
    assert weak.rstrip("=") not in err
