"""The one table of store kinds: the settings check, the start command and ``make_store`` all read it,
so each value names the same kind in all three, and a kind's missing extra is named at start."""

import importlib.util

import pytest
from pydantic import ValidationError

from elicitation_gateway.server import runner
from elicitation_gateway.server.command import main as serve_main
from elicitation_gateway.settings import Settings
from elicitation_gateway.stores import make_store
from elicitation_gateway.stores.memory import MemoryStore
from elicitation_gateway.stores.redis import RedisStore
from elicitation_gateway.stores.schemes import SCHEMES, scheme_of
from elicitation_gateway.stores.sqlite import SqliteStore


@pytest.mark.parametrize(
    ("value", "kind", "store"),
    [
        ("memory", "memory", MemoryStore),
        ("sqlite:///gateway.db", "sqlite", SqliteStore),
        ("sqlite:///gateway.db?synchronous=full", "sqlite", SqliteStore),
        ("redis://127.0.0.1:6379/0", "redis", RedisStore),
        ("rediss://user:secret@redis.example:6380/1", "redis", RedisStore),
        ("unix:///run/redis.sock", "redis", RedisStore),
    ],
)
def test_a_value_names_one_kind_which_the_settings_accept_and_make_store_makes(value, kind, store):
    assert scheme_of(value).name == kind
    assert [scheme.name for scheme in SCHEMES if scheme.matches(value)] == [kind]
    assert isinstance(make_store(Settings(store=value)), store)


@pytest.mark.parametrize(
    "value", ["memoryx", "Memory", "sqlite", "redis", "redis:/host", "postgres://db/1", ""]
)
def test_a_value_that_names_no_kind_is_told_every_kind(value):
    with pytest.raises(ValueError, match="must be") as refused:
        scheme_of(value)
    for scheme in SCHEMES:
        assert scheme.described in str(refused.value)
    with pytest.raises(ValidationError, match="must be 'memory', a SQLite file"):
        Settings(store=value)


def test_the_start_command_names_the_extra_a_kind_needs_when_its_package_is_missing(monkeypatch, capsys):
    found = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "redis" else found(name))
    monkeypatch.setattr(runner, "serve", lambda settings: pytest.fail("started without the redis package"))
    assert serve_main(["--store", "redis://127.0.0.1:6379/0"]) == 2
    assert (
        "the Redis store needs the redis package: pip install 'elicitation-gateway[redis]'"
        in capsys.readouterr().err
    )
