"""Choosing the store from the ``store`` setting: in memory (the default), a SQLite file, or a Redis URL.

The kinds, and how a value names each, are in :mod:`elicitation_gateway.stores.schemes`; each kind's
module is imported only when it is made.
"""

from typing import TYPE_CHECKING

from elicitation_gateway.stores.schemes import StoreSettings, scheme_of

if TYPE_CHECKING:
    from elicitation_gateway.stores.base import Store


def make_store(settings: StoreSettings) -> "Store":
    return scheme_of(settings.store).make(settings)
