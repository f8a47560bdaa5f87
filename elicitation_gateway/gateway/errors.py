"""The service's refusals: what a call of the :class:`~elicitation_gateway.gateway.Gateway` raises when
it cannot do what it is asked (HTTP knows them from :mod:`elicitation_gateway.server.refusals`)."""

from elicitation_gateway.records import Record, Status


class NotFound(LookupError):
    """No pending (or, where it matters, no finished) record with this id; ``status``, how it
    finished, when it is known to have been asked and has finished."""

    def __init__(self, request_id: str, status: Status | None = None) -> None:
        super().__init__(request_id)
        self.request_id = request_id
        self.status = status


class AlreadyFinished(Exception):
    def __init__(self, record: Record) -> None:
        super().__init__(f"{record.id} is already {record.status}")
        self.record = record


class ShuttingDown(Exception):
    """The gateway is stopping and takes no new questions."""


class LimitExceeded(Exception):
    """Too many questions pending; the tool may ask again once some are answered."""


class TooLarge(Exception):
    """A question larger than a session's whole budget: it can never be asked as it is."""


class TooManySubscribers(Exception):
    """As many event streams are open as the gateway serves (``GATEWAY_MAX_SUBSCRIBERS``)."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"{limit} event streams are open, the most the gateway serves (GATEWAY_MAX_SUBSCRIBERS)"
        )


class KeyReused(Exception):
    """An ``Idempotency-Key`` used again with another body."""
