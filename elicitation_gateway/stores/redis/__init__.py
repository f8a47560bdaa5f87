"""The Redis store: one set of questions for every replica, and one event stream they all send.

Keys (``prefix`` is ``gateway`` unless told otherwise)::

    {prefix}:record:{id}    the Record as JSON; a finished one expires after the retention period
                            (a pending one leaves by finishing: every replica times it out)
    {prefix}:pending        sorted set of pending ids, scored by creation time (oldest first)
    {prefix}:sessions       hash: pending questions per session
    {prefix}:events         stream of events, capped (``XADD MAXLEN ~``)
    {prefix}:replica:{id}   a replica's liveness entry: refreshed every third of its lifetime
    {prefix}:waits:{id}     set of the ids whose tool waits on a blocking request to that replica
    {prefix}:replicas       set of the replicas that have such a set
    {prefix}:claimed:{name}  work one replica does for all, claimed once (``SET NX``): a webhook's
                            delivery of an event (``webhook:{event id}``), kept for a day
    {prefix}:escalated:{id}:{step}  an escalation step announced, set once (``SET NX``) by the first
                            replica; it lasts until a minute after the question expires
    {prefix}:audit          list of the audit trail's entries, oldest first (:mod:`.audit`)
    {prefix}:audit:last     the last entry appended, which the next one follows

Every change is one Lua script, one round trip, that also appends its event to the stream: ``add``
keeps a record, ``finish`` moves one out of the pending set only if it is still there. So a record
finishes once in the whole cluster, and its ``question.replied`` or ``question.rejected`` goes out
exactly once.

Each replica runs one ``XREAD`` loop that decodes every stream entry once and hands the same event to
all of its local subscribers. An event's id is derived from its stream entry's id (see
:func:`.codec.event_id_of`), so every replica sends the same ids, in the same order, and a ``Last-Event-ID``
from any replica leads back to the same place in the stream.

Besides its event (``e``), an entry that adds or finishes a record carries what replicas would
otherwise ask Redis for: how many records are pending after the change, in all (``n``) and in the
record's session (``s``), as the script counted them, and a finish's finished record (``r``). Each
replica keeps the counts of the entries it has read (:class:`.counts.PendingCounts`), so checking the limits
costs no round trip, and hands the finished record to the requests waiting for it without reading
it back.

When Redis cannot be reached, calls raise :class:`.StoreUnavailable`, local streams end
(clients reconnect and replay), and the loop keeps retrying until Redis is back.

A replica that dies leaves questions whose tool waited on it, and nobody can collect their answers.
Each replica keeps a liveness entry that lapses unless refreshed, and notes in a set of its own the
questions its tools wait for (sent in the background, batched: no round trip of a request's own).
A replica that finds another's entry lapsed moves that replica's set into its own, in one script
(so once across replicas), and the gateway withdraws those still pending (the store's
``tool_liveness``, :meth:`.Liveness.abandoned`).
It claims only once it has itself been connected for a whole lifetime: after an outage of Redis every
replica refreshes its entry before any other may find it lapsed.

The package, one file a concern::

    scripts.py     the Lua scripts that change records, and their sending in batches
    codec.py       what a stream entry holds; event ids derived from entry ids
    keys.py        the names of the keys above
    connection.py  the connections to Redis, and what an unreachable Redis raises
    follower.py    the loop that follows the stream; subscriptions, replayed or announced afresh
    counts.py      the pending counts each replica keeps from the entries it reads
    cache.py       the pending records each replica keeps parsed
    waiters.py     the requests waiting for a record to finish, and the records handed to them
    liveness.py    liveness entries and waits sets; the claims of gone replicas' questions
    callers.py     orphans, and Idempotency-Keys held across replicas
    once.py        claims and escalation marks: work one replica does for all, once
    store.py       the store: records added and finished, a composition of the parts above
"""

from elicitation_gateway.stores.redis.store import RedisStore

__all__ = ["RedisStore"]
