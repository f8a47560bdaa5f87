"""The people file: what it accepts, what it refuses (naming the entry), logins and addressing."""

import asyncio
import contextlib
import threading

import bcrypt
import pytest
from hypothesis import given
from hypothesis import strategies as st

from elicitation_gateway import people as people_module
from elicitation_gateway.people import (
    NAME,
    PeopleError,
    UnknownRecipient,
    hash_password,
    load_people,
    parse_people,
)
from tests.helpers import until

ARGON2 = hash_password("correct horse")
BCRYPT = bcrypt.hashpw(b"battery staple", bcrypt.gensalt(rounds=4)).decode()

FILE = f"""
[people.alice]
password = "{ARGON2}"
groups = ["oncall", "leads"]
notify = ["ntfys://ntfy.sh/alice"]

[people.bob]
password = "{BCRYPT}"
groups = ["oncall"]

[people.carol]
password = "plain text"
"""


@pytest.fixture(scope="module")
def team():
    return parse_people(FILE)


def test_a_file_gives_each_person_their_groups_and_notifications(team):
    assert set(team.persons) == {"alice", "bob", "carol"}
    assert team.persons["alice"].groups == {"oncall", "leads"}
    assert team.persons["alice"].notify == ("ntfys://ntfy.sh/alice",)
    assert team.groups == {"oncall": {"alice", "bob"}, "leads": {"alice"}}


def test_a_person_shows_no_password_when_printed(team):
    assert "plain text" not in repr(team.persons["carol"])
    assert ARGON2 not in repr(team.persons["alice"])


def test_to_reaches_people_and_whole_groups(team):
    assert team.reached_by(["group:oncall"]) == {"alice", "bob"}
    assert team.reached_by(["carol", "group:leads"]) == {"carol", "alice"}
    assert team.reached_by([]) == frozenset()


@pytest.mark.parametrize("name", ["dave", "group:nobody", "group:", "Alice", "alice ", ""])
def test_to_naming_nobody_is_refused_naming_it(team, name):
    with pytest.raises(UnknownRecipient, match="names no") as raised:
        team.reached_by(["alice", name])
    assert raised.value.name == name
    assert repr(name) in str(raised.value)


@pytest.mark.parametrize(
    ("user", "password", "who"),
    [
        ("alice", "correct horse", "alice"),  # argon2
        ("bob", "battery staple", "bob"),  # bcrypt
        ("carol", "plain text", "carol"),  # as given
        ("alice", "correct hors", None),
        ("alice", "", None),
        ("bob", "correct horse", None),  # another person's password
        ("carol", "plain tex", None),
        ("carol", "plain text ", None),
        ("dave", "plain text", None),
        ("", "", None),
        ("carol", "\udcff", None),  # a lone surrogate, as a hostile client's decoded bytes may hold
    ],
)
def test_a_login_is_its_person_only_with_their_password(team, user, password, who):
    person = asyncio.run(team.login(user, password))
    assert (person.name if person else None) == who


def test_a_hashed_login_is_checked_once_then_remembered():
    team = parse_people(FILE)
    assert team.login_at_once("alice", "correct horse") is None  # would need a hash: not done on the spot
    assert asyncio.run(team.login("alice", "correct horse")).name == "alice"
    assert team.login_at_once("alice", "correct horse").name == "alice"
    assert team.login_at_once("alice", "wrong") is None
    assert team.login_at_once("carol", "plain text").name == "carol"


def test_a_remembered_login_ends_with_the_reading_of_the_file():
    """A new reading (SIGHUP) with another password forgets the old one at once."""
    first = parse_people(FILE)
    asyncio.run(first.login("alice", "correct horse"))
    changed = parse_people(FILE.replace(ARGON2, hash_password("new one")))
    assert changed.login_at_once("alice", "correct horse") is None
    assert asyncio.run(changed.login("alice", "correct horse")) is None
    assert asyncio.run(changed.login("alice", "new one")).name == "alice"


def test_wrong_passwords_are_hashed_a_few_at_a_time(monkeypatch):
    """A flood of wrong passwords queues for the hash instead of taking every worker thread."""
    team = parse_people(FILE)
    running = 0
    most = 0
    lock = threading.Lock()
    release = threading.Event()

    def slow_verify(password: str, secret: str) -> bool:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        release.wait(5)
        with lock:
            running -= 1
        return False

    monkeypatch.setattr(people_module, "_verify", slow_verify)

    async def flood() -> list[object]:
        tries = [asyncio.create_task(team.login("alice", f"guess {n}")) for n in range(20)]
        await until(lambda: most >= people_module._CONCURRENT_HASHES, what="the first hashes running")
        await asyncio.sleep(0.2)  # room for more to start, were more let in (however slow, never fewer)
        release.set()
        return await asyncio.gather(*tries)

    assert asyncio.run(flood()) == [None] * 20
    assert most == people_module._CONCURRENT_HASHES


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('[people.alice]\npasword = "x"', "people.alice.pasword: unknown key"),
        ('[people.alice]\npassword = "x"\ngroup = ["a"]', "people.alice.group: unknown key"),
        ('[person.alice]\npassword = "x"', "person: unknown key"),
        ("[people.alice]", "people.alice.password: missing"),
        ('[people.alice]\npassword = ""', "people.alice.password: should not be empty"),
        ("[people.alice]\npassword = 1234", "people.alice.password: should be a string"),
        ('[people.alice]\npassword = "x"\ngroups = "oncall"', "people.alice.groups: should be a list"),
        ('[people.alice]\npassword = "x"\ngroups = ["on call"]', "'on call' is not a group name"),
        ('[people.alice]\npassword = "x"\nnotify = ["alice@example.com"]', "is not an Apprise URL"),
        ('[people."a:b"]\npassword = "x"', "people.a:b: 'a:b' is not a login name"),
        ('[people."-a"]\npassword = "x"', "is not a login name"),
        ('[people.alice]\npassword = "$argon2id$v=19$broken"', "people.alice.password: looks like an argon2"),
        ('[people.alice]\npassword = "$2b$12$short"', "people.alice.password: looks like an argon2"),
        ("[people]", "people: should not be empty"),
        ("", "people: missing"),
        ("[[people]]", "people: should be a table"),
        ("[people.alice\npassword = 1", "is not TOML"),
    ],
)
def test_a_bad_file_is_refused_naming_the_entry(text, says):
    with pytest.raises(PeopleError, match="people file") as raised:
        parse_people(text)
    assert says in str(raised.value)


def test_a_missing_or_unreadable_file_is_named(tmp_path):
    with pytest.raises(PeopleError, match=f"people file {tmp_path / 'nope.toml'} cannot be read"):
        load_people(tmp_path / "nope.toml")
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"\xff\xfe[people.a]")
    with pytest.raises(PeopleError, match="cannot be read"):
        load_people(binary)
    good = tmp_path / "people.toml"
    good.write_text(FILE)
    assert set(load_people(good).persons) == {"alice", "bob", "carol"}


@given(st.text(max_size=200))
def test_any_text_is_read_or_refused_with_a_people_error(text):
    with contextlib.suppress(PeopleError):
        parse_people(text)


@given(st.from_regex(NAME, fullmatch=True), st.text(min_size=1).filter(lambda p: not p.startswith("$")))
def test_any_login_name_and_password_round_trip(name, password):
    escaped = password.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    team = parse_people(f'[people."{name}"]\npassword = {_toml_string(escaped)}\n')
    assert team.login_at_once(name, escaped).name == name
    assert asyncio.run(team.login(name, escaped + "x")) is None


def _toml_string(value: str) -> str:
    return '"' + "".join(c if c.isprintable() and c not in '"\\' else f"\\U{ord(c):08X}" for c in value) + '"'
