"""A user id that differs is a different user: ids are compared exactly as given, never
normalised, and an id that cannot be stored exactly (NUL, a lone surrogate, longer than
``IdentifierError.LIMIT``, empty) is refused with ``IdentifierError`` wherever it enters, so
``"alice\\x00"`` never reaches alice's instances, credentials, switches, tokens or notes, and
nothing of the refused call reaches the ledger. Every test runs on SQLite and on PostgreSQL,
against one host per database (each test has owners of its own)."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import pytest

import expediter
from expediter.core.host import Host
from expediter.core.instances.keys import generate_key
from expediter.core.ledger.columns import KEY_LIMIT, stored_key
from expediter.core.ledger.database import Database
from expediter.core.ledger.schema import upgrade
from expediter.errors import IdentifierError, InstanceNotFound

SECRET = "sk-victim-5e2a9c7d1b"
TOKEN = "at-victim-88c1f02e"
NOTE = "the victim's private note"


class Vault(expediter.Toolbox):
    """Reads what the owner's credential opens."""

    name = "vault"
    config_fields = (expediter.ConfigField("api_key", required=True, secret=True),)

    @expediter.action
    def peek(self, context: expediter.CallContext) -> dict[str, Any]:
        """Who is calling (``ascii()``: a result's control characters are dropped), and the
        credential's tail."""
        return {
            "tail": self.config["api_key"][-4:],
            "owner": ascii(context.owner_id),
            "invoker": ascii(context.user_id),
        }


_owners = itertools.count()


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def host(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Host]:
    """One host per database (the instance tests' tool plus the built-ins)."""
    root = tmp_path_factory.mktemp("exact-identity")
    if request.param == "sqlite":
        url = f"sqlite:///{root / 'identity.db'}"
    else:
        cluster = request.getfixturevalue("pg_cluster")
        name = f"identity_{next(_owners)}"
        cluster.createdb(name)
        url = cluster.url(name)
    upgrade(Database.parse(url))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("EXPEDITER_SECRET_KEYS", generate_key())
        made = Host(
            database_url=url, home=root / "home", autoload=False, builtins=True, plugins=[Vault]
        )
    try:
        yield made
    finally:
        made.close()


def _long(base: str) -> str:
    return base + "x" * (KEY_LIMIT + 100)


#: ``(form, the victim's id, the hostile id)`` built from a base unique to each test: the
#: hostile id was, before ids were compared exactly, stored and looked up as the victim's.
FORMS: dict[str, tuple[Callable[[str], str], Callable[[str], str]]] = {
    "nul-after": (lambda b: b, lambda b: b + "\x00"),
    "nul-before": (lambda b: b, lambda b: "\x00" + b),
    "nul-inside": (lambda b: b, lambda b: b[:2] + "\x00" + b[2:]),
    "nuls": (lambda b: b, lambda b: "\x00" + b + "\x00\x00"),
    "lone-high-surrogate": (lambda b: b + "\ufffd", lambda b: b + "\ud800"),
    "lone-low-surrogate-first": (lambda b: "\ufffd" + b, lambda b: "\udc00" + b),
    "undecodable-argv-byte": (lambda b: b + "\ufffd", lambda b: b + "\udcff"),
    "pair-as-two-code-points": (lambda b: b + "\ufffd\ufffd", lambda b: b + "\ud83d\ude00"),
    "nul-and-surrogate": (lambda b: b + "\ufffd", lambda b: b + "\x00\udfff"),
    "longer-than-stored": (lambda b: stored_key(_long(b)), _long),
}


@attrs.frozen
class Victim:
    """What one user holds: an instance with a credential, a note, a token slot, switches."""

    host: Host
    owner: str
    instance: Any

    def state(self) -> dict[str, Any]:
        """Everything of theirs an attack could change or take."""
        instances = self.host.instances
        record = instances.get(self.instance.id, user_id=self.owner, decrypt=True)
        notes = self.host.call("notes", "list", {}, user_id=self.owner)
        assert notes.status == "completed", notes.error
        return {
            "record": record.to_dict(),
            "secrets": record.secrets,
            "listed": [item.id for item in instances.list(self.owner)],
            "notes": [note["text"] for note in notes.result["notes"]],
            "token": instances.tokens(self.instance.id).get(self.owner),
            "names": sorted(self.host.toolset(user_id=self.owner).name_map.names),
        }


def _victim(host: Host, owner: str) -> Victim:
    instance = host.instances.add("vault", "home", {"api_key": SECRET}, user_id=owner)
    noted = host.call("notes", "add", {"text": NOTE}, user_id=owner)
    assert noted.status == "completed", noted.error
    host.instances.tokens(instance.id, user_id=owner).put(owner, {"access_token": TOKEN})
    return Victim(host, owner, instance)


def _rows(host: Host) -> int:
    return len(host.ledger.rows(limit=0))


Attack = Callable[[Victim, str], object]

#: Every owner-scoped operation, done by the hostile id against the victim's data.
ATTACKS: dict[str, Attack] = {
    "get": lambda v, who: v.host.instances.get(v.instance.id, user_id=who, decrypt=True),
    "list": lambda v, who: v.host.instances.list(who, decrypt=True),
    "add-as-owner": lambda v, who: v.host.instances.add(
        "vault", "planted", {"api_key": "sk-planted"}, user_id=who
    ),
    "update-config": lambda v, who: v.host.instances.update(
        v.instance.id, config={"api_key": "sk-stolen"}, user_id=who
    ),
    "update-name": lambda v, who: v.host.instances.update(v.instance.id, name="taken", user_id=who),
    "remove": lambda v, who: v.host.instances.remove(v.instance.id, user_id=who),
    "disable": lambda v, who: v.host.instances.disable(v.instance.id, user_id=who),
    "enable": lambda v, who: v.host.instances.enable(v.instance.id, user_id=who),
    "opt-out-of-a-default-tool": lambda v, who: v.host.instances.disable("clock", user_id=who),
    "opt-in-to-a-default-tool": lambda v, who: v.host.instances.enable("clock", user_id=who),
    "tokens": lambda v, who: v.host.instances.tokens(v.instance.id, user_id=who),
    "token-slot-read": lambda v, who: v.host.instances.tokens(v.instance.id).get(who),
    "token-slot-write": lambda v, who: v.host.instances.tokens(v.instance.id).put(
        who, {"access_token": "at-planted"}
    ),
    "token-slot-delete": lambda v, who: v.host.instances.tokens(v.instance.id).delete(who),
    "binding": lambda v, who: v.host.instances.binding(v.instance.id, who),
    "lookup": lambda v, who: v.host.instances.lookup(v.instance.id, who),
    "offered": lambda v, who: v.host.instances.offered(who),
    "toolset": lambda v, who: v.host.toolset(user_id=who),
    "toolset-delegating": lambda v, who: v.host.toolset(user_id=who, instances=[v.instance.id]),
    "call-the-instance": lambda v, who: v.host.call(v.instance.id, "peek", {}, user_id=who),
    "acall-the-instance": lambda v, who: asyncio.run(
        v.host.acall(v.instance.id, "peek", {}, user_id=who)
    ),
    "notes-read": lambda v, who: v.host.call("notes", "list", {}, user_id=who),
    "notes-search": lambda v, who: v.host.call(
        "notes", "search", {"query": "private"}, user_id=who
    ),
    "notes-write": lambda v, who: v.host.call("notes", "add", {"text": "planted"}, user_id=who),
}


@pytest.mark.parametrize("attack", list(ATTACKS))
@pytest.mark.parametrize("form", list(FORMS))
def test_an_id_that_cannot_be_stored_exactly_is_refused_and_reaches_nothing_of_the_user(
    host: Host, form: str, attack: str
) -> None:
    base = f"alice{next(_owners)}"
    owner_of, hostile_of = FORMS[form]
    owner, hostile = owner_of(base), hostile_of(base)
    assert hostile != owner
    victim = _victim(host, owner)
    # What the attack would undo: the instance switched off, the default tool opted out of.
    if attack == "enable":
        host.instances.disable(victim.instance.id, user_id=owner)
    if attack == "opt-in-to-a-default-tool":
        host.instances.disable("clock", user_id=owner)
    before, rows = victim.state(), _rows(host)
    with pytest.raises(IdentifierError) as refused:
        ATTACKS[attack](victim, hostile)
    assert _rows(host) == rows, "a refused id reaches no ledger row"
    assert isinstance(refused.value, ValueError)
    message = str(refused.value)
    assert message.startswith("user id ")
    assert "\x00" not in message
    assert not any("\ud800" <= char <= "\udfff" for char in message)
    assert "\n" not in message
    assert victim.state() == before


#: Instance ids that, before ids were compared exactly, were looked up as the victim's.
INSTANCE_FORMS: dict[str, Callable[[str], str]] = {
    "nul-after": lambda i: i + "\x00",
    "nul-before": lambda i: "\x00" + i,
    "nul-inside": lambda i: i[:8] + "\x00" + i[8:],
}

#: Every operation that finds an instance by its id, done by its owner with a hostile id.
BY_ID: dict[str, Attack] = {
    "get": lambda v, i: v.host.instances.get(i, user_id=v.owner, decrypt=True),
    "get-as-operator": lambda v, i: v.host.instances.get(i, decrypt=True),
    "update": lambda v, i: v.host.instances.update(i, config={"api_key": "sk-x"}),
    "remove": lambda v, i: v.host.instances.remove(i),
    "disable": lambda v, i: v.host.instances.disable(i),
    "enable": lambda v, i: v.host.instances.enable(i, user_id=v.owner),
    "tokens": lambda v, i: v.host.instances.tokens(i),
    "binding": lambda v, i: v.host.instances.binding(i, v.owner),
    "lookup": lambda v, i: v.host.instances.lookup(i),
    "toolset": lambda v, i: v.host.toolset(user_id="mallory", instances=[i]),
    "call": lambda v, i: v.host.call(i, "peek", {}),
}


@pytest.mark.parametrize("operation", list(BY_ID))
@pytest.mark.parametrize("form", list(INSTANCE_FORMS))
def test_an_instance_id_that_cannot_be_stored_exactly_is_refused(
    host: Host, form: str, operation: str
) -> None:
    victim = _victim(host, f"alice{next(_owners)}")
    before, rows = victim.state(), _rows(host)
    with pytest.raises(IdentifierError, match="instance id "):
        BY_ID[operation](victim, INSTANCE_FORMS[form](victim.instance.id))
    assert _rows(host) == rows
    assert victim.state() == before


@pytest.mark.parametrize(
    ("given", "taken"),
    [("ho\x00me", "home"), ("h\ud800", "h\ufffd"), ("\udcffhome", "\ufffdhome")],
)
def test_an_instance_name_that_cannot_be_stored_exactly_is_refused_not_cleaned(
    host: Host, given: str, taken: str
) -> None:
    owner = f"alice{next(_owners)}"
    host.instances.add("vault", taken, {"api_key": SECRET}, user_id=owner)
    other = host.instances.add("vault", "other", {"api_key": SECRET}, user_id=owner)
    with pytest.raises(IdentifierError, match=r"^instance name "):
        host.instances.add("vault", given, {"api_key": SECRET}, user_id=owner)
    with pytest.raises(IdentifierError, match=r"^instance name "):
        host.instances.update(other.id, name=given)
    assert sorted(item.name for item in host.instances.list(owner)) == sorted([taken, "other"])


@pytest.mark.parametrize(
    "instance",
    [
        expediter.ToolInstance(tool="notes", instance_id="n\ud800"),
        expediter.ToolInstance(tool="notes", instance_id="n\x00"),
        expediter.ToolInstance(tool="notes", instance_id="notes-inline", owner_id="alice\x00"),
        expediter.ToolInstance(tool="notes", instance_id="notes-inline", owner_id="b\udc80"),
    ],
    ids=["surrogate-id", "nul-id", "nul-owner", "surrogate-owner"],
)
def test_an_inline_instance_whose_id_or_owner_cannot_be_stored_exactly_is_refused(
    host: Host, instance: expediter.ToolInstance
) -> None:
    rows = _rows(host)
    with pytest.raises(IdentifierError):
        host.toolset(user_id="alice", instances=[instance])
    assert _rows(host) == rows


def test_the_empty_id_is_refused_it_would_be_the_key_of_calls_made_without_a_user(
    host: Host,
) -> None:
    anonymous = host.call("notes", "add", {"text": "nobody's"}, user_id=None)
    assert anonymous.status == "completed", anonymous.error
    rows = _rows(host)
    for attack in ("notes-read", "toolset", "offered", "list"):
        with pytest.raises(IdentifierError, match="is empty"):
            ATTACKS[attack](Victim(host, "", None), "")
    instance = host.instances.add(
        "vault", "tokens", {"api_key": SECRET}, user_id=f"dave{next(_owners)}"
    )
    tokens = host.instances.tokens(instance.id)
    tokens.put(None, {"access_token": TOKEN})
    with pytest.raises(IdentifierError, match="is empty"):
        tokens.get("")
    assert _rows(host) == rows
    assert tokens.get(None) == {"access_token": TOKEN}


def test_an_id_that_is_no_string_is_refused(host: Host) -> None:
    for value in (7, b"alice", 1.5):
        with pytest.raises(IdentifierError, match="is a string"):
            host.toolset(user_id=value)  # type: ignore[arg-type]
        with pytest.raises(IdentifierError, match="is a string"):
            host.instances.list(value)


class _Shady(str):
    """A str whose equality lies: the id used is the text it holds."""

    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = str.__hash__


def test_a_str_subclass_is_used_as_the_plain_text_it_holds(host: Host) -> None:
    owner = f"carol{next(_owners)}"
    mine = host.instances.add("vault", "mine", {"api_key": SECRET}, user_id=_Shady(owner))
    assert type(mine.owner_id) is str
    assert mine.owner_id == owner


#: Ids stored and compared exactly as given: other scripts, astral characters, control
#: characters (both databases keep them byte for byte), surrounding blanks, NFC and NFD
#: spellings of one name, an id at the length limit.
LEGITIMATE = {
    "latin": ("zoë", "zoe"),
    "nfd-is-another-user": ("zoe\u0308", "zoë"),
    "cjk": ("用户", "用户 "),
    "astral": ("😀", "\ufffd"),
    "control-characters": ("alice\x1b[2J\x7f", "alice[2J"),
    "blanks": (" alice ", "alice"),
    "at-the-limit": ("u" * KEY_LIMIT, "u" * (KEY_LIMIT - 1)),
}


@pytest.mark.parametrize("kind", list(LEGITIMATE))
def test_a_legitimate_id_works_exactly_and_a_look_alike_is_another_user(
    host: Host, kind: str
) -> None:
    user, look_alike = LEGITIMATE[kind]
    suffix = str(next(_owners))
    if len(user) < KEY_LIMIT:
        user, look_alike = user + suffix, look_alike + suffix
    victim = _victim(host, user)
    assert victim.instance.owner_id == user
    assert [item.id for item in host.instances.list(user)] == [victim.instance.id]
    assert host.instances.binding(victim.instance.id, user).config["api_key"] == SECRET
    event = host.call(victim.instance.id, "peek", {}, user_id=user)
    assert event.status == "completed", event.error
    assert (event.result["owner"], event.result["invoker"]) == (ascii(user), ascii(user))
    row = host.ledger.get(event.key)
    assert row is not None
    assert (row.user_id, row.owner_id, row.delegated_from) == (user, user, None)
    toolset = host.toolset(user_id=user)
    name = toolset.name_map.name_for(victim.instance.id, "peek")
    assert name is not None
    [run] = toolset.run(
        [
            expediter.ToolCall(
                "c1", name, {}, instance_id=victim.instance.id, tool="vault", action="peek"
            )
        ],
        message_id=f"m-{kind}-{suffix}",
    )
    assert run.status == "completed", run.error
    assert host.ledger.get(run.key).user_id == user  # type: ignore[union-attr]
    assert victim.state()["notes"] == [NOTE]
    assert victim.state()["token"] == {"access_token": TOKEN}
    # The look-alike is somebody else: none of the user's instance, notes or tokens.
    assert host.instances.list(look_alike) == []
    with pytest.raises(InstanceNotFound):
        host.instances.get(victim.instance.id, user_id=look_alike)
    with pytest.raises(InstanceNotFound):
        host.instances.binding(victim.instance.id, look_alike)
    offered = host.toolset(user_id=look_alike).name_map.entries
    assert victim.instance.id not in {entry.instance_id for entry in offered}
    assert host.call("notes", "list", {}, user_id=look_alike).result["notes"] == []
    assert host.instances.tokens(victim.instance.id).get(look_alike) is None
    delegated = host.call(victim.instance.id, "peek", {}, user_id=look_alike)
    delegated_row = host.ledger.get(delegated.key)
    assert delegated_row is not None
    assert (delegated_row.user_id, delegated_row.delegated_from) == (look_alike, user)


def test_the_longest_id_stored_exactly_is_the_ledgers_key_limit() -> None:
    assert IdentifierError.LIMIT == KEY_LIMIT
    assert IdentifierError.check("u" * KEY_LIMIT) == "u" * KEY_LIMIT
    with pytest.raises(IdentifierError, match=f"more than the {KEY_LIMIT} kept"):
        IdentifierError.check("u" * (KEY_LIMIT + 1))


def test_the_error_is_public_and_names_what_was_refused() -> None:
    assert expediter.IdentifierError is IdentifierError
    assert issubclass(IdentifierError, expediter.errors.ExpediterError)
    with pytest.raises(expediter.IdentifierError) as refused:
        IdentifierError.check("alice\x00", "owner id")
    assert refused.value.what == "owner id"
    assert str(refused.value) == (
        "owner id 'alice\\x00' cannot be stored exactly: it holds NUL (U+0000); ids are "
        "compared exactly as stored, so it is refused rather than changed: give one without it"
    )
