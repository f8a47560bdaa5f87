"""What the store tests share."""

import itertools
from collections.abc import AsyncIterator, Callable

import pytest

from elicitation_gateway.stores.memory import MemoryStore
from elicitation_gateway.stores.sqlite import SqliteStore

_numbers = itertools.count()


@pytest.fixture(params=["memory", "sqlite"])
async def make_process_store(request, tmp_path) -> AsyncIterator[Callable[..., object]]:
    """Makes the stores of one process (in memory, and in a SQLite file) with the options given, each
    started, and closes them after the test."""
    made = []

    async def make(**options):
        if request.param == "memory":
            store = MemoryStore(**options)
        else:
            store = SqliteStore(tmp_path / f"store{next(_numbers)}.db", **options)
        await store.start()
        made.append(store)
        return store

    yield make
    for store in made:
        await store.close()
