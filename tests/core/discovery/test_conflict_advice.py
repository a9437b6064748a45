"""A tool-name conflict's advice names a switch that disables exactly one of the packs (a name
no other pack in the conflict answers to), and otherwise says how to remove one."""

from __future__ import annotations

import re

import pytest

from expediter.core.discovery.catalogue import Conflict

SWITCH = re.compile(r"EXPEDITER_DISABLE_PLUGINS=([\w-]+(?:\.[\w-]+)*)")
DICE_DIST = ("expediter-dice", "1.0", "entry-point", "entry-point:expediter-dice")


def advice(tool: str, *packs: tuple[str, str | None, str, str]) -> str:
    return Conflict(tool=tool, packs=packs).message.split("neither is offered. ", 1)[1]


def test_two_distributions_are_disabled_by_their_distribution_names() -> None:
    other = ("other-dice", "0.9", "entry-point", "entry-point:other-dice")
    assert advice("dice", DICE_DIST, other) == (
        "Disable one with EXPEDITER_DISABLE_PLUGINS=expediter-dice or "
        "EXPEDITER_DISABLE_PLUGINS=other-dice."
    )


@pytest.mark.parametrize(
    "dice",
    [
        ("dice", "2.0", "entry-point", "entry-point:dice"),
        ("dice", None, "directory", "directory:/srv/tools/dice.py"),
    ],
    ids=["distribution", "directory"],
)
def test_a_name_the_other_packs_entry_point_answers_to_is_not_offered_as_a_switch(
    dice: tuple[str, str | None, str, str],
) -> None:
    # expediter-dice's entry point is named "dice": EXPEDITER_DISABLE_PLUGINS=dice would
    # disable both packs.
    text = advice("dice", DICE_DIST, dice)
    assert re.findall(r"EXPEDITER_DISABLE_PLUGINS=([\w-]+(?:\.[\w-]+)*)", text) == [
        "expediter-dice"
    ]
    assert text.startswith("Disable one with EXPEDITER_DISABLE_PLUGINS=expediter-dice, or ")
    removal = (
        "uninstall dice." if dice[2] == "entry-point" else "rename or move /srv/tools/dice.py."
    )
    assert text.endswith(removal)


def test_packs_of_the_same_name_are_told_apart_by_how_to_remove_one() -> None:
    twin = ("expediter-dice", "1.1", "entry-point", "entry-point:expediter-dice")
    assert advice("dice", DICE_DIST, twin) == (
        "Resolve it: uninstall one of the distributions named 'expediter-dice'."
    )
    first = ("lookup", None, "directory", "directory:/a/lookup.py")
    second = ("lookup", None, "directory", "directory:/b/lookup.py")
    assert advice("lookup", first, second) == (
        "Resolve it: rename or move /a/lookup.py, or rename or move /b/lookup.py."
    )


def test_names_compare_like_distribution_names() -> None:
    shouting = ("Expediter_Dice", None, "directory", "directory:/t/Expediter_Dice.py")
    other = ("other-dice", "0.9", "entry-point", "entry-point:other-dice")
    text = advice("dice", DICE_DIST, shouting, other)
    assert text == (
        "Disable one with EXPEDITER_DISABLE_PLUGINS=other-dice, or uninstall expediter-dice, "
        "or rename or move /t/Expediter_Dice.py."
    )


def test_objects_given_to_the_host_are_never_switched() -> None:
    host = ("host", None, "host", "host:host")
    clock = ("clock", "0.1", "built-in", "built-in:/x/clock.py")
    assert advice("clock", host, clock) == "Disable one with EXPEDITER_DISABLE_PLUGINS=clock."
    assert advice("clock", host, host) == "Rename or remove one of them."
