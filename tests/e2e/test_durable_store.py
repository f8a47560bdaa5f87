"""A gateway on a SQLite file, killed with SIGKILL and started again on the same file, its file deleted
while it runs, its disk full: real processes."""

import asyncio
import re
import resource
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from elicitation_gateway.client import GatewayClient
from tests.e2e.test_cli import free_port, gateway_process
from tests.helpers import ask, form, pending, read_events, text_properties, until

QUESTION = form(text_properties(1))


async def created(client: httpx.AsyncClient, **query: str) -> str:
    response = await client.post("/elicitations", json=QUESTION, params=query)
    assert response.status_code == 201, response.text
    return response.json()["id"]


async def listed(client: httpx.AsyncClient) -> list[str]:
    return [question["id"] for question in (await client.get("/question")).json()]


async def test_what_a_killed_gateway_kept_is_there_after_a_restart(tmp_path):
    store = f"sqlite:///{tmp_path / 'gateway.db'}"
    with gateway_process("--port", "0", "--store", store) as (process, url):
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            async with read_events(client) as watching:
                answered = await created(client)
                first = await watching.next("question.asked")
                waiting = await created(client)
                short = await created(client, timeout="1.5")
                asked_at = time.monotonic()
                blocking = ask(client, QUESTION)  # POST /elicit: its connection dies with the process
                for _ in range(3):
                    blocking_id = (await watching.next("question.asked")).properties["id"]
                reply = await client.post(f"/question/{answered}/reply", json={"answers": [["blue"]]})
                assert reply.status_code == 200
                await watching.next("question.replied")
                process.kill()  # SIGKILL: no shutdown, nothing finished on the way out
                await asyncio.to_thread(process.wait, 10)
            assert isinstance(blocking.exception(), httpx.TransportError)

    await asyncio.sleep(max(0, asked_at + 1.6 - time.monotonic()))  # ``short`` times out while down
    with gateway_process("--port", "0", "--store", store) as (process, url):
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            # Withdrawn at start (its tool is gone), expired at once (its time passed): one left.
            assert await listed(client) == [waiting]
            assert (await client.get(f"/elicitations/{blocking_id}")).json()["status"] == "cancelled"
            assert (await client.get(f"/elicitations/{short}")).json()["status"] == "expired"
            result = (await client.get(f"/elicitations/{answered}")).json()
            assert result == {
                "id": answered,
                "status": "answered",
                "result": {"action": "accept", "content": {"k0": "blue"}},
            }

            async with read_events(client, skip_connected=False) as fresh:
                await fresh.next("server.connected")
                announced = await fresh.next("question.asked")
                assert announced.properties["id"] == waiting
                await fresh.no_frame(type="question.asked")

            async with read_events(client, headers={"Last-Event-ID": first.id}) as replaying:
                replayed = [await replaying.next() for _ in range(6)]
            assert [(f.type, f.properties.get("id") or f.properties["requestID"]) for f in replayed] == [
                ("question.asked", waiting),
                ("question.asked", short),
                ("question.asked", blocking_id),
                ("question.replied", answered),
                ("question.rejected", blocking_id),
                ("question.rejected", short),
            ]
            assert [f.id for f in replayed] == sorted(f.id for f in replayed)

            polling = asyncio.create_task(client.get(f"/elicitations/{waiting}", params={"wait": 10}))
            await asyncio.sleep(0.2)
            assert not polling.done()
            reply = await client.post(f"/question/{waiting}/reply", json={"answers": [["green"]]})
            assert reply.status_code == 200
            assert (await polling).json()["result"] == {"action": "accept", "content": {"k0": "green"}}


async def test_the_python_client_gets_its_answer_across_a_kill_and_restart(tmp_path):
    store = f"sqlite:///{tmp_path / 'gateway.db'}"
    port = free_port()
    async with GatewayClient(f"http://127.0.0.1:{port}", reconnect_for=30, poll_wait=2) as tool:
        with gateway_process("--port", str(port), "--store", store) as (process, url):
            async with httpx.AsyncClient(base_url=url, timeout=10) as client, read_events(client) as watching:
                eliciting = asyncio.create_task(tool.elicit(QUESTION))
                request_id = (await watching.next("question.asked")).properties["id"]
            process.kill()
            await asyncio.to_thread(process.wait, 10)
        await asyncio.sleep(0.5)  # the client is reconnecting meanwhile
        assert not eliciting.done()
        with gateway_process("--port", str(port), "--store", store) as (process, url):
            async with httpx.AsyncClient(base_url=url, timeout=10) as client:
                assert await listed(client) == [request_id]
                reply = await client.post(f"/question/{request_id}/reply", json={"answers": [["yes"]]})
                assert reply.status_code == 200
                result = await asyncio.wait_for(eliciting, 15)
    assert (result.action, result.content) == ("accept", {"k0": "yes"})


# ---------------------------------------------------------------------------------------------------
# Faults: the file deleted while the gateway runs, a full disk


LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d [\d:,]+ (?P<level>[A-Z]+) (?P<logger>\S+): (?P<message>.*)$")


def log_entries(output: str) -> list[dict[str, str]]:
    """The log lines a gateway printed, each as its level (lower case), logger and message."""
    entries = []
    for line in output.splitlines():
        if found := LOG_LINE.match(line):
            entries.append({**found.groupdict(), "level": found["level"].lower()})
    return entries


def stopped(process: subprocess.Popen) -> str:
    """SIGTERM, as an operator stops it; the rest of what it printed."""
    process.send_signal(signal.SIGTERM)
    process.wait(20)
    assert process.stdout is not None
    return process.stdout.read()


async def ready(client: httpx.AsyncClient) -> bool:
    return (await client.get("/readyz")).status_code == 200


def assert_store_unavailable(response: httpx.Response, words: str) -> None:
    assert response.status_code == 503, response.text
    assert response.headers["retry-after"] == "1"
    assert response.json()["error"] == "store_unavailable"
    assert words in response.json()["message"]


async def test_a_deleted_file_is_503_with_a_reason_and_a_graceful_stop_writes_it_back(tmp_path):
    path = tmp_path / "gateway.db"
    store = f"sqlite:///{path}"
    with gateway_process("--port", "0", "--store", store) as (process, url):
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            answered = await created(client)
            assert (
                await client.post(f"/question/{answered}/reply", json={"answers": [["a"]]})
            ).status_code == 200
            kept = await created(client)
            blocking = ask(client, QUESTION)
            [_, blocking_id] = [question["id"] for question in await pending(client, 2)]
            # The audit trail is written in order: the last ask's entry there, every earlier one is.
            await until(lambda: audited(client, blocking_id), what="the audit entries written")
            path.unlink()

            assert_store_unavailable(await client.post("/elicitations", json=QUESTION), "was deleted")
            reply = await client.post(f"/question/{kept}/reply", json={"answers": [["b"]]})
            assert_store_unavailable(reply, "was deleted")
            readiness = await client.get("/readyz")
            assert readiness.status_code == 503
            assert readiness.json()["store"] == "unavailable"
            assert "gateway.db was deleted" in readiness.json()["reason"]
            assert (await client.get("/healthz")).json() == readiness.json()
            assert (await client.get("/livez")).status_code == 200
            assert await listed(client) == [kept, blocking_id]  # still held, still shown
            assert not blocking.done()
            assert not path.exists()

            output = await asyncio.to_thread(stopped, process)
            # Its question's withdrawal could not be written: the tool gets cancel all the same.
            assert (await blocking).json() == {"action": "cancel"}

    errors = [entry for entry in log_entries(output) if entry["level"] in ("error", "critical")]
    assert [entry["logger"] for entry in errors] == ["elicitation_gateway.stores.sqlite"], errors
    assert "was deleted" in errors[0]["message"]
    assert path.exists(), "the graceful stop wrote what the gateway held back to the path"

    with gateway_process("--port", "0", "--store", store) as (process, url):
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            assert await listed(client) == [kept]
            assert (await client.get(f"/elicitations/{blocking_id}")).json()["status"] == "cancelled"
            assert (await client.get(f"/elicitations/{answered}")).json()["result"] == {
                "action": "accept",
                "content": {"k0": "a"},
            }
            reply = await client.post(f"/question/{kept}/reply", json={"answers": [["b"]]})
            assert reply.status_code == 200


async def test_a_full_disk_is_503_and_the_gateway_recovers_when_it_is_freed(tmp_path):
    """The gateway's file size limit (``RLIMIT_FSIZE``, SIGXFSZ ignored as Python does) set to what its
    write-ahead log holds: SQLite can write nothing more, as on a full disk."""
    path = tmp_path / "gateway.db"
    with gateway_process("--port", "0", "--store", f"sqlite:///{path}") as (process, url):
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            kept = await created(client)
            await until(lambda: audited(client, kept), what="the question's audit entry written")
            full = await asyncio.to_thread(lambda: Path(f"{path}-wal").stat().st_size)
            resource.prlimit(process.pid, resource.RLIMIT_FSIZE, (full, resource.RLIM_INFINITY))
            try:
                assert_store_unavailable(
                    await client.post("/elicitations", json=QUESTION), "cannot be written"
                )
                reply = await client.post(f"/question/{kept}/reply", json={"answers": [["b"]]})
                assert_store_unavailable(reply, "cannot be written")
                readiness = await client.get("/readyz")
                assert readiness.status_code == 503
                assert "cannot be written" in readiness.json()["reason"]
                assert await listed(client) == [kept]
            finally:
                resource.prlimit(process.pid, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY,) * 2)
            await until(lambda: ready(client), what="the readiness check's own write works again")
            reply = await client.post(f"/question/{kept}/reply", json={"answers": [["b"]]})
            assert reply.status_code == 200
            assert (await client.post("/elicitations", json=QUESTION)).status_code == 201
            output = await asyncio.to_thread(stopped, process)

    entries = log_entries(output)
    errors = [entry["message"] for entry in entries if entry["level"] in ("error", "critical")]
    assert len(errors) == 1, errors
    assert "cannot be written" in errors[0]
    assert any("written again" in entry["message"] for entry in entries if entry["level"] == "info")


async def audited(client: httpx.AsyncClient, request_id: str) -> bool:
    """Whether the audit trail holds the question's ``asked``: it is written just after the ask, and
    would otherwise meet the full disk too."""
    response = await client.get("/audit", params={"question": request_id})
    return response.status_code == 200 and '"asked"' in response.text


BIG_QUESTION = form(
    {
        "type": "object",
        "properties": {
            f"k{i}": {"type": "string", "title": f"Field {i}", "description": "x" * 9000} for i in range(30)
        },
    }
)
"""About 300 KB of questions: a change of over half a megabyte in the file (the record and its event)."""


async def test_under_a_file_size_limit_readiness_says_what_a_large_ask_gets(tmp_path):
    """``RLIMIT_FSIZE`` a little above what the write-ahead log holds: small changes still fit, a large
    one fails (EFBIG), as on an almost full disk. Readiness follows the large one: a small write that
    works does not make the store ready while an ask like the refused one would still get 503."""
    path = tmp_path / "gateway.db"
    with gateway_process("--port", "0", "--store", f"sqlite:///{path}") as (process, url):
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            kept = await created(client)
            await until(lambda: audited(client, kept), what="the question's audit entry written")
            logged = await asyncio.to_thread(lambda: Path(f"{path}-wal").stat().st_size)
            limit = logged + 128 * 1024  # room for a few small changes
            resource.prlimit(process.pid, resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
            try:
                assert await ready(client)  # nothing refused yet
                big = await client.post("/elicitations", json=BIG_QUESTION)
                assert_store_unavailable(big, "cannot be written")
                readiness = await client.get("/readyz")
                assert readiness.status_code == 503, readiness.text
                assert readiness.json()["store"] == "unavailable"
                assert "cannot be written" in readiness.json()["reason"]

                small = await created(client)  # a small change still fits...
                readiness = await client.get("/readyz")
                assert readiness.status_code == 503, "ready while a large ask still gets 503"
                assert "cannot be written" in readiness.json()["reason"]
                again = await client.post("/elicitations", json=BIG_QUESTION)
                assert_store_unavailable(again, "cannot be written")  # ...and a large one still fails
                assert sorted(await listed(client)) == sorted([kept, small])
            finally:
                resource.prlimit(process.pid, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY,) * 2)
            await until(lambda: ready(client), what="the readiness check's own write of that size works")
            assert (await client.post("/elicitations", json=BIG_QUESTION)).status_code == 201
            assert await ready(client)
            output = await asyncio.to_thread(stopped, process)

    entries = log_entries(output)
    errors = [entry["message"] for entry in entries if entry["level"] in ("error", "critical")]
    assert len(errors) == 1, errors
    written_again = [entry for entry in entries if "written again" in entry["message"]]
    assert len(written_again) == 1, entries  # once, when the large write worked: not at the small one


def chattr(flag: str, *paths: Path) -> None:
    subprocess.run(["chattr", flag, *map(str, paths)], check=True, capture_output=True)


def can_make_immutable(directory: Path) -> bool:
    """Whether this machine lets the tests set the immutable attribute (root, and a file system with
    it): what stands in for a file that became read-only, as a read-only mount makes every file."""
    probe = directory / "probe"
    probe.touch()
    try:
        chattr("+i", probe)
    except (OSError, subprocess.CalledProcessError):
        return False
    chattr("-i", probe)
    return True


async def test_a_file_that_takes_no_writes_is_not_ready_before_an_ask_meets_it(tmp_path):
    """The database and its log made immutable while the gateway runs: every write fails (EPERM), as
    on a file system remounted read-only. The readiness check's own small write says so, and says the
    store is ready again once the files take writes."""
    if not can_make_immutable(tmp_path):
        pytest.skip("chattr +i is not permitted here")
    path = tmp_path / "gateway.db"
    with gateway_process("--port", "0", "--store", f"sqlite:///{path}") as (process, url):
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            kept = await created(client)
            await until(lambda: audited(client, kept), what="the question's audit entry written")
            files = [path, Path(f"{path}-wal")]
            chattr("+i", *files)
            try:

                async def unready() -> bool:
                    await asyncio.sleep(0.2)  # few requests: nobody reads the gateway's log meanwhile
                    return (await client.get("/readyz")).status_code == 503

                await until(unready, timeout=30, what="/readyz saying 503 before any ask fails")
                readiness = (await client.get("/readyz")).json()
                assert readiness["store"] == "unavailable"
                assert "cannot be written" in readiness["reason"]
                assert_store_unavailable(
                    await client.post("/elicitations", json=QUESTION), "cannot be written"
                )
                assert await listed(client) == [kept]
            finally:
                chattr("-i", *files)
            await until(lambda: ready(client), timeout=30, what="the readiness check's own write works")
            assert (await client.post("/elicitations", json=QUESTION)).status_code == 201
            output = await asyncio.to_thread(stopped, process)

    errors = [entry["message"] for entry in log_entries(output) if entry["level"] in ("error", "critical")]
    assert len(errors) == 1, errors
