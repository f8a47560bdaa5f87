"""The Lua scripts that change records, and how they are sent: each change one script, one round trip.

``ADD`` keeps a record and ``FINISH`` moves one out of the pending set only if it is still there, each
appending its event to the stream; ``RETRACT`` undoes an add whose reply never came, whether or not it
has arrived yet; ``CLAIM_ORPHAN`` claims a caller's orphan once; ``CLAIM_WAITS``
moves a gone replica's waited-on ids to the replica that found it gone. Every script tells a second
run of itself (a retry after a lost reply) from the first. :class:`ScriptBatches` sends those of all
requests in flight together, as one pipeline.
"""

import asyncio
import contextlib
import hashlib
from typing import Any

from redis.asyncio import ConnectionPool, Redis
from redis.asyncio.connection import AbstractConnection
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError
from redis.exceptions import TimeoutError as RedisTimeoutError


class Script:
    """A Lua script, run by its SHA1 once Redis has it (sent whole the first time, and after Redis
    forgot it)."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.sha = hashlib.sha1(source.encode()).hexdigest()


class HeldConnection:
    """One connection of a pool, kept for a user that sends one command at a time: the pool's
    checkout, lock, retry and instrumentation around each command cost about 30 µs here, more than
    the rest of a small command. redis-py closes the connection on any failure to send or read (so
    no reply is left unread on it) and connects it again on the next command."""

    def __init__(self, pool: ConnectionPool) -> None:
        self._pool = pool
        self._connection: AbstractConnection | None = None

    async def execute(self, *args: Any) -> Any:
        if (connection := self._connection) is None:
            connection = self._connection = await self._pool.get_connection()
        await connection.send_command(*args, check_health=False)
        return await connection.read_response()

    async def close(self) -> None:
        if self._connection is not None:
            with contextlib.suppress(Exception):
                await self._connection.disconnect(nowait=True)


class ScriptBatches:
    """Runs the scripts of all requests in flight together: those called while a batch is on its way
    go out in the next, as one pipeline, one exchange with Redis.

    redis-py lends a connection per command, with a lock, a retry and instrumentation around each;
    under load that was most of what a round trip spent on Redis, and Redis runs one command at a
    time anyway. In a pipeline it is paid once per batch, and the commands are still packed, sent and
    parsed by redis-py. When the connection breaks, redis-py sends a batch again whole: the scripts
    tell a second run of themselves from the first. A script called while nothing else is on its way
    goes out alone, on a :class:`HeldConnection`.

    Batches are sent by a task of their own, so a caller that gives up (its request cancelled) does
    not take the others' replies with it."""

    def __init__(self, redis: Redis) -> None:
        self._redis = redis
        self._queued: list[tuple[Script, list[str], list[Any], asyncio.Future[Any]]] = []
        self._sender: asyncio.Task[None] | None = None
        self._alone = False  # a command is on its way by itself
        self._held = HeldConnection(redis.connection_pool)  # the one it goes on

    async def run(self, script: Script, keys: list[str], args: list[Any]) -> Any:
        if self._sender is None and not self._alone:
            # Nothing else on its way (one request at a time): a batch would only cost. Whatever comes
            # meanwhile goes out in batches.
            self._alone = True
            try:
                return await self._execute_one(script, keys, args)
            finally:
                self._alone = False
        loop = asyncio.get_running_loop()
        reply: asyncio.Future[Any] = loop.create_future()
        self._queued.append((script, keys, args, reply))
        if self._sender is None:
            self._sender = loop.create_task(self._send())
        return await reply

    async def close(self, drain_seconds: float) -> None:
        """Let the batch on its way finish (its callers get their replies; for ``drain_seconds`` at
        most), then stop."""
        if (sender := self._sender) is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(drain_seconds):
                    await asyncio.shield(sender)
            sender.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sender
        await self._held.close()

    async def _send(self) -> None:
        try:
            while self._queued:
                batch, self._queued = self._queued, []
                try:
                    replies = await self._execute([(script, keys, args) for script, keys, args, _ in batch])
                except Exception as error:  # every caller gets it, as from its own call
                    replies = [error] * len(batch)
                for (*_, reply), result in zip(batch, replies, strict=True):
                    if reply.done():  # its caller gave up
                        continue
                    if isinstance(result, BaseException):
                        reply.set_exception(result)
                    else:
                        reply.set_result(result)
        finally:
            self._sender = None

    async def _execute_one(self, script: Script, keys: list[str], args: list[Any]) -> Any:
        """A connection that broke is connected again and the script sent once more, as redis-py's
        own retry would (the scripts tell a second run from the first)."""
        try:
            return await self._alone_once(script, keys, args)
        except (RedisConnectionError, RedisTimeoutError, OSError):
            return await self._alone_once(script, keys, args)

    async def _alone_once(self, script: Script, keys: list[str], args: list[Any]) -> Any:
        try:
            return await self._held.execute("EVALSHA", script.sha, len(keys), *keys, *args)
        except NoScriptError:  # not run: Redis restarted, or was flushed, since it had it
            return await self._held.execute("EVAL", script.source, len(keys), *keys, *args)

    async def _execute(self, batch: list[tuple[Script, list[str], list[Any]]]) -> list[Any]:
        async with self._redis.pipeline(transaction=False) as pipe:
            for script, keys, args in batch:
                pipe.evalsha(script.sha, len(keys), *keys, *args)
            replies: list[Any] = await pipe.execute(raise_on_error=False)
        # Not run: Redis restarted, or was flushed, since it had them. Sent whole, in the same order.
        unknown = [n for n, reply in enumerate(replies) if isinstance(reply, NoScriptError)]
        if unknown:
            async with self._redis.pipeline(transaction=False) as pipe:
                for n in unknown:
                    script, keys, args = batch[n]
                    pipe.eval(script.source, len(keys), *keys, *args)
                for n, reply in zip(unknown, await pipe.execute(raise_on_error=False), strict=True):
                    replies[n] = reply
        return replies


ADD = Script("""
-- KEYS: record, pending set, sessions hash, events stream
-- ARGV: request id, record, creation time, session id, event, stream length
-- Returns the entry's id and the counts after it; nothing when the record is there already (a retry
-- of an add whose reply was lost), so that a retry neither counts nor announces it twice.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return false
end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
local in_session = redis.call('HINCRBY', KEYS[3], ARGV[4], 1)
local pending = redis.call('ZCARD', KEYS[2])
local entry = redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[6], '*',
  'e', ARGV[5], 'n', pending, 's', in_session)
return {entry, pending, in_session}
""")

FINISH = Script("""
-- KEYS: record, pending set, sessions hash, events stream
-- ARGV: request id, finished record, retention (ms), session id, event, stream length
-- Returns the entry's id and the counts after it; nothing when the record was not pending; 0 when
-- this very finish was made already (a retry of a finish whose reply was lost).
if redis.call('ZREM', KEYS[2], ARGV[1]) == 0 then
  if redis.call('GET', KEYS[1]) == ARGV[2] then
    return 0
  end
  return false
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
local in_session = redis.call('HINCRBY', KEYS[3], ARGV[4], -1)
if in_session <= 0 then
  redis.call('HDEL', KEYS[3], ARGV[4])
  in_session = 0
end
local pending = redis.call('ZCARD', KEYS[2])
local entry = redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[6], '*',
  'e', ARGV[5], 'n', pending, 's', in_session, 'r', ARGV[2])
return {entry, pending, in_session}
""")

RETRACT = Script("""
-- KEYS: record, pending set, sessions hash, events stream
-- ARGV: request id, finished record, retention (ms), session id, event, stream length
-- An add whose outcome was unknown, undone. Pending: finished as FINISH does (the same reply). Not
-- there: the finished record is kept in its place, so that the add, arriving later, keeps nothing
-- (ADD does nothing for a record that exists); returns 1. Finished already (answered, or this very
-- retraction made before its reply was lost): nothing; false, or 0 for this retraction.
if redis.call('ZREM', KEYS[2], ARGV[1]) == 1 then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  local in_session = redis.call('HINCRBY', KEYS[3], ARGV[4], -1)
  if in_session <= 0 then
    redis.call('HDEL', KEYS[3], ARGV[4])
    in_session = 0
  end
  local pending = redis.call('ZCARD', KEYS[2])
  local entry = redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[6], '*',
    'e', ARGV[5], 'n', pending, 's', in_session, 'r', ARGV[2])
  return {entry, pending, in_session}
end
local kept = redis.call('GET', KEYS[1])
if kept == ARGV[2] then
  return 0
end
if kept then
  return false
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1
""")

CLAIM_ORPHAN = Script("""
-- KEYS: the caller's orphans list; ARGV: the orphaned-key prefix, the digest of the claiming call
-- Returns {request id} once claimed, {request id, 0} for a digest that differs (nothing claimed), {}
-- when the caller has none. Ids whose window ended (no orphaned key) are dropped on the way.
while true do
  local request_id = redis.call('LINDEX', KEYS[1], 0)
  if not request_id then
    return {}
  end
  local digest = redis.call('GET', ARGV[1] .. request_id)
  if not digest then
    redis.call('LPOP', KEYS[1])
  elseif digest ~= ARGV[2] then
    return {request_id, 0}
  else
    redis.call('LPOP', KEYS[1])
    redis.call('DEL', ARGV[1] .. request_id)
    return {request_id}
  end
end
""")
CLAIM_WAITS = Script("""
-- KEYS: replicas set, the gone replica's liveness entry, its waits set, this replica's waits set
-- ARGV: the gone replica's id, this replica's id
-- Moves the gone replica's waited-on ids into this replica's set; returns how many. Nothing while the
-- replica is alive, or once another replica (or this one, sending it again) has claimed them.
if redis.call('EXISTS', KEYS[2]) == 1 then
  return 0
end
local ids = redis.call('SMEMBERS', KEYS[3])
for first = 1, #ids, 1000 do
  redis.call('SADD', KEYS[4], unpack(ids, first, math.min(first + 999, #ids)))
end
redis.call('DEL', KEYS[3])
redis.call('SREM', KEYS[1], ARGV[1])
if #ids > 0 then
  redis.call('SADD', KEYS[1], ARGV[2])
end
return #ids
""")

JOIN_KEY = Script("""
-- KEYS: the key's hold (a hash: e epoch, q question id, d digest, n holders, o kept for an orphan)
-- ARGV: a new epoch, the question id to hold it for, the digest of the joining call, lease (ms)
-- Returns {epoch, question id, 1} when held now by this call, {epoch, question id, 0} when joined;
-- {} while the last call's question is being kept for it; {'', digest} when held for another digest.
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HSET', KEYS[1], 'e', ARGV[1], 'q', ARGV[2], 'd', ARGV[3], 'n', 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
  return {ARGV[1], ARGV[2], 1}
end
local held = redis.call('HMGET', KEYS[1], 'e', 'q', 'd', 'o')
if held[3] ~= ARGV[3] then
  return {'', held[3]}
end
if held[4] then
  return {}
end
redis.call('HINCRBY', KEYS[1], 'n', 1)
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return {held[1], held[2], 0}
""")
LEAVE_KEY = Script("""
-- KEYS: the key's hold; ARGV: the epoch joined, 1 to keep the key held when the last holder leaves
-- Returns the holders left (-1: that holding is over); at none, the hold goes, or is kept, marked.
if redis.call('HGET', KEYS[1], 'e') ~= ARGV[1] then
  return -1
end
local left = redis.call('HINCRBY', KEYS[1], 'n', -1)
if left <= 0 then
  if ARGV[2] == '1' then
    redis.call('HSET', KEYS[1], 'o', 1)
  else
    redis.call('DEL', KEYS[1])
  end
end
return left
""")
REKEY = Script("""
-- KEYS: the key's hold; ARGV: the epoch joined, what it now stands for (a field and its value), or
-- nothing to free it. Nothing when the holding is over.
if redis.call('HGET', KEYS[1], 'e') ~= ARGV[1] then
  return 0
end
if ARGV[2] then
  redis.call('HSET', KEYS[1], ARGV[2], ARGV[3])
else
  redis.call('DEL', KEYS[1])
end
return 1
""")
