"""People and groups (``GATEWAY_PEOPLE``): who may answer, and whom a question is for.

A TOML file names each person with a password (as given, or an argon2 or bcrypt hash), their groups and
the Apprise URLs of their own notifications::

    [people.alice]
    password = "…"
    groups = ["oncall"]
    notify = ["ntfys://ntfy.sh/alice-1f2e"]

A file with an unknown key or a bad entry is refused whole, with a message naming the entry: a typo
must not quietly leave someone out, or let someone in.
"""

import asyncio
import hashlib
import hmac
import logging
import os
import re
import tomllib
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pwdlib import PasswordHash
from pwdlib.exceptions import UnknownHashError
from pwdlib.hashers.argon2 import Argon2Hasher
from pwdlib.hashers.bcrypt import BcryptHasher
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

logger = logging.getLogger(__name__)

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
"""A person's or a group's name: a login name (never ``:``, which HTTP Basic cannot carry), and
plain to read in a log."""
_NAME_RULE = "letters, digits, '.', '_' and '-', starting with a letter or digit; at most 64"
GROUP_PREFIX = "group:"
HASH_PREFIXES = ("$argon2", "$2a$", "$2b$", "$2y$")
"""A password that starts so is a hash; any other is the password itself."""
_BCRYPT = re.compile(r"\$2[aby]\$\d\d\$[./A-Za-z0-9]{53}")
_HASHING = PasswordHash((Argon2Hasher(), BcryptHasher()))
_REMEMBERED_LOGINS = 1024
"""Logins checked against a hash that are kept, so that a person's every request does not cost a hash
(tens of milliseconds): as a keyed digest, never the password itself."""
_CONCURRENT_HASHES = 2
"""Hash checks run at once, in worker threads: a flood of wrong passwords waits its turn instead of
taking every thread (and argon2's memory for each)."""


class PeopleError(ValueError):
    """The people file cannot be used; the message names the file and the entry."""


class UnknownRecipient(ValueError):
    """A ``to`` names nobody listed: the message names it."""

    def __init__(self, name: str) -> None:
        what = "group" if name.startswith(GROUP_PREFIX) else "person"
        super().__init__(f"{name!r} names no {what} of the people file")
        self.name = name


class NoPeople(UnknownRecipient):
    """A ``to`` on a gateway without a people file."""

    def __init__(self, name: str) -> None:
        ValueError.__init__(self, f"'to' names {name!r}, but the gateway has no people file (GATEWAY_PEOPLE)")
        self.name = name


MAX_RECIPIENTS = 50
"""Names in one ``to``."""


def parsed_to(value: object) -> tuple[str, ...]:
    """An ask's ``to``: a list of names (``alice``, ``group:oncall``), at most :data:`MAX_RECIPIENTS`,
    each named once; raises :class:`ValueError` saying what is wrong."""
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
        raise ValueError('"to" must be a list of names, such as ["alice", "group:oncall"]')
    if len(value) > MAX_RECIPIENTS:
        raise ValueError(f'"to" names {len(value)}; at most {MAX_RECIPIENTS}')
    for name in value:
        if not NAME.fullmatch(name.removeprefix(GROUP_PREFIX)):
            raise ValueError(f'"to" holds {name[:80]!r}, which is no name of a person or group')
    return tuple(dict.fromkeys(value))


@dataclass(frozen=True, slots=True)
class Viewer:
    """Who looks at the answerer side of a gateway with people: a person, or ``None`` for the shared
    login, which sees only the questions addressed to nobody in particular."""

    person: str | None
    people: "People"

    def sees(self, to: Iterable[str] | None) -> bool:
        if not to:
            return True
        return self.person is not None and self.people.reaches(to, self.person)


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    password: str = Field(min_length=1)
    groups: tuple[str, ...] = ()
    notify: tuple[str, ...] = ()

    @field_validator("password")
    @classmethod
    def _hash_readable(cls, value: str) -> str:
        if value.startswith(HASH_PREFIXES) and not _readable_hash(value):
            raise ValueError("looks like an argon2 or bcrypt hash, but is not a whole one")
        return value

    @field_validator("groups")
    @classmethod
    def _group_names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for group in value:
            if not NAME.fullmatch(group):
                raise ValueError(
                    f"{group!r} is not a group name (letters, digits, '.', '_', '-'; at most 64)"
                )
        return value

    @field_validator("notify")
    @classmethod
    def _urls(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for url in value:
            if "://" not in url:
                raise ValueError(f"{url!r} is not an Apprise URL (scheme://…)")
        return value


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    people: dict[str, _Entry] = Field(min_length=1)


def _readable_hash(value: str) -> bool:
    if value.startswith("$argon2"):
        try:
            from argon2 import extract_parameters
            from argon2.exceptions import InvalidHashError

            extract_parameters(value)
        except (InvalidHashError, ValueError):
            return False
        return True
    return _BCRYPT.fullmatch(value) is not None


@dataclass(frozen=True, slots=True)
class Person:
    name: str
    groups: frozenset[str]
    notify: tuple[str, ...]
    secret: str = field(repr=False)
    """The password as given, or its hash."""

    @property
    def hashed(self) -> bool:
        return self.secret.startswith(HASH_PREFIXES)


class People:
    """The people of one reading of the file: logins, groups, and whom a ``to`` reaches."""

    def __init__(self, persons: Iterable[Person]) -> None:
        self.persons: Mapping[str, Person] = {person.name: person for person in persons}
        groups: dict[str, set[str]] = {}
        for person in self.persons.values():
            for group in person.groups:
                groups.setdefault(group, set()).add(person.name)
        self.groups: Mapping[str, frozenset[str]] = {name: frozenset(names) for name, names in groups.items()}
        self._key = os.urandom(32)
        self._remembered: OrderedDict[bytes, str] = OrderedDict()
        self._hashing = asyncio.Semaphore(_CONCURRENT_HASHES)

    def __len__(self) -> int:
        return len(self.persons)

    def reached_by(self, to: Iterable[str]) -> frozenset[str]:
        """The names of everyone ``to`` names, person by person and group by group; an empty ``to``
        reaches nobody in particular (the question is everyone's)."""
        names: set[str] = set()
        for recipient in to:
            if recipient.startswith(GROUP_PREFIX):
                members = self.groups.get(recipient.removeprefix(GROUP_PREFIX))
                if members is None:
                    raise UnknownRecipient(recipient)
                names |= members
            elif recipient in self.persons:
                names.add(recipient)
            else:
                raise UnknownRecipient(recipient)
        return frozenset(names)

    def check_known(self, to: Iterable[str]) -> None:
        """Raises :class:`UnknownRecipient` for the first name of ``to`` that reaches nobody."""
        self.reached_by(to)

    def reaches(self, to: Iterable[str], person: str) -> bool:
        """Whether ``to`` names ``person``, by name or by a group of theirs, as the file says now (a name
        the file has since lost reaches nobody)."""
        mine = self.persons.get(person)
        if mine is None:
            return False
        for name in to:
            if name == person:
                return True
            if name.startswith(GROUP_PREFIX) and name[len(GROUP_PREFIX) :] in mine.groups:
                return True
        return False

    def login_at_once(self, username: str, password: str) -> Person | None:
        """The person these credentials are, where no hash must be computed: a password kept as given,
        or a login already checked; ``None`` for any other (:meth:`login` decides those)."""
        person = self.persons.get(username)
        if person is None:
            return None
        if not person.hashed:
            return person if hmac.compare_digest(_bytes(password), _bytes(person.secret)) else None
        return person if self._remembered.get(self._digest(username, password)) == person.secret else None

    async def login(self, username: str, password: str) -> Person | None:
        """The person whose credentials these are, or ``None``. A hash is checked in a worker thread,
        a few at a time, and a login that passed is remembered for this reading of the file."""
        person = self.persons.get(username)
        if person is None or not person.hashed:
            return self.login_at_once(username, password)
        digest = self._digest(username, password)
        if self._remembered.get(digest) == person.secret:
            self._remembered.move_to_end(digest)
            return person
        async with self._hashing:
            right = await asyncio.to_thread(_verify, password, person.secret)
        if not right:
            return None
        self._remembered[digest] = person.secret
        while len(self._remembered) > _REMEMBERED_LOGINS:
            self._remembered.popitem(last=False)
        return person

    def _digest(self, username: str, password: str) -> bytes:
        return hmac.new(self._key, _bytes(f"{username}\0{password}"), hashlib.sha256).digest()


def _bytes(text: str) -> bytes:
    """UTF-8, a lone surrogate (from a client's undecodable bytes) kept rather than raising."""
    return text.encode("utf-8", "surrogatepass")


def _verify(password: str, secret: str) -> bool:
    try:
        return _HASHING.verify(password, secret)
    except (UnknownHashError, ValueError):
        return False


def hash_password(password: str) -> str:
    """An argon2 hash of ``password`` for the people file (``elicitation-gateway hash-password``)."""
    return _HASHING.hash(password)


def parse_people(text: str, source: str = "people file") -> People:
    """The people of a file's text; :class:`PeopleError` names what is wrong and where."""
    try:
        data: Any = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise PeopleError(f"{source} is not TOML: {error}") from None
    try:
        read = _File.model_validate(data)
    except ValidationError as error:
        raise PeopleError(f"{source}: {_first_problem(error)}") from None
    for name in read.people:
        if not NAME.fullmatch(name):
            raise PeopleError(f"{source}: people.{name}: {name!r} is not a login name ({_NAME_RULE})")
    return People(
        Person(name, frozenset(entry.groups), entry.notify, entry.password)
        for name, entry in read.people.items()
    )


def load_people(path: Path) -> People:
    """The people of the file at ``path``; :class:`PeopleError` if it cannot be read or used."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise PeopleError(f"people file {path} cannot be read: {error}") from None
    return parse_people(text, f"people file {path}")


class PeopleFile:
    """The people file, read at start and again on :meth:`reload` (SIGHUP); a reading that cannot be
    used keeps the one before, so a typo saved mid-edit locks nobody out."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.current = load_people(path)

    def reload(self) -> bool:
        try:
            self.current = load_people(self.path)
        except PeopleError as error:
            problem = str(error)
        else:
            problem = None
        if problem is not None:
            logger.error("%s; the people read before stay", problem)
            return False
        logger.info("people file %s read again: %d people", self.path, len(self.current))
        return True


def _first_problem(error: ValidationError) -> str:
    """The problem a person fixes first: a misspelt key before the key it was meant to be."""
    problems = sorted(error.errors(include_url=False), key=lambda found: found["type"] != "extra_forbidden")
    problem = problems[0]
    where = ".".join(str(part) for part in problem["loc"]) or "the file"
    said = _SAID.get(problem["type"])
    return f"{where}: {said or problem['msg'].removeprefix('Value error, ')}"


_SAID = {
    "extra_forbidden": "unknown key",
    "missing": "missing",
    "string_type": "should be a string",
    "tuple_type": "should be a list of strings",
    "dict_type": "should be a table ([people.<name>] for each person)",
    "too_short": "should not be empty",
    "string_too_short": "should not be empty",
}
