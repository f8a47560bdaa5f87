"""People on the answerer side (GATEWAY_PEOPLE), against a real gateway: each signs in with their own
login (a password as given, or an argon2 or bcrypt hash), beside the shared password or without it; the
tool side is untouched. And as a process: a bad file stops the start naming the entry, and SIGHUP reads
the file again, keeping the old one when the new cannot be used."""

import asyncio
import base64
import signal
import subprocess
import sys

import bcrypt
import httpx
import pytest

from elicitation_gateway.people import hash_password
from tests.e2e.test_cli import gateway_process
from tests.helpers import read_events
from tests.processes import reaped

SHARED = "shared-secret-7d1c"
PEOPLE = f"""
[people.alice]
password = "{hash_password("alice-pass")}"
groups = ["oncall"]

[people.bob]
password = "{bcrypt.hashpw(b"bob-pass", bcrypt.gensalt(rounds=4)).decode()}"

[people.carol]
password = "carol-pass"
"""
LOGINS = [("alice", "alice-pass"), ("bob", "bob-pass"), ("carol", "carol-pass")]
WRONG = [
    ("alice", "bob-pass"),
    ("alice", "alice-pas"),
    ("dave", "alice-pass"),
    ("opencode", "alice-pass"),
    ("alice", ""),
    ("", ""),
    ("alice:alice-pass", ""),
]


def token(user: str, password: str) -> str:
    return base64.b64encode(f"{user}:{password}".encode()).decode()


@pytest.fixture
def people_file(tmp_path):
    path = tmp_path / "people.toml"
    path.write_text(PEOPLE)
    return path


async def test_each_person_signs_in_with_their_own_login(make_server, people_file):
    server = make_server(people=people_file)
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
        assert (await http.get("/question")).status_code == 401
        for user, password in LOGINS:
            for _ in range(2):  # the second time from what was remembered
                assert (await http.get("/question", auth=(user, password))).status_code == 200, user
        for user, password in WRONG:
            refused = await http.get("/question", auth=(user, password))
            assert refused.status_code == 401, (user, password)
            assert refused.headers["www-authenticate"].startswith("Basic")
        # The shared login is not set: OpenCode's default username with any password opens nothing.
        assert (await http.get("/question", auth=("opencode", ""))).status_code == 401
        # The tool side is not the people's: no token is set, so it stays open.
        assert (await http.get("/elicitations")).status_code != 401


async def test_event_streams_take_a_persons_login_or_auth_token(make_server, people_file):
    server = make_server(people=people_file)
    # read_events returns once the stream has said server.connected
    alice = httpx.AsyncClient(base_url=server.url, timeout=10, auth=("alice", "alice-pass"))
    async with alice, read_events(alice, "/event"):
        pass
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
        async with read_events(http, "/global/event", params={"auth_token": token("bob", "bob-pass")}):
            pass
        refused = await http.get("/event", params={"auth_token": token("bob", "alice-pass")})
        assert refused.status_code == 401


async def test_the_shared_password_still_works_beside_people(make_server, people_file):
    server = make_server(people=people_file, answerer_password=SHARED)
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
        assert (await http.get("/question", auth=("opencode", SHARED))).status_code == 200
        assert (await http.get("/question", auth=("carol", "carol-pass"))).status_code == 200
        assert (await http.get("/question", auth=("carol", SHARED))).status_code == 401
        assert (await http.get("/question", auth=("opencode", "carol-pass"))).status_code == 401


async def test_a_flood_of_wrong_passwords_leaves_others_served(make_server, people_file):
    """Each wrong password for a hashed login costs a hash, a few at a time off the event loop: a person
    already signed in, and the health check, are served meanwhile."""
    server = make_server(people=people_file)
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        assert (await http.get("/question", auth=("alice", "alice-pass"))).status_code == 200
        flood = [asyncio.create_task(http.get("/question", auth=("alice", f"guess-{n}"))) for n in range(30)]
        await asyncio.sleep(0.05)
        for _ in range(5):
            assert (await http.get("/question", auth=("alice", "alice-pass"))).status_code == 200
            assert (await http.get("/livez")).status_code == 200
        assert {response.status_code for response in await asyncio.gather(*flood)} == {401}


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('[people.alice]\npasword = "x"', "people.alice.pasword: unknown key"),
        ('[people.alice]\npassword = "x"\ngroups = "oncall"', "people.alice.groups: should be a list"),
        ("[people.alice", "is not TOML"),
    ],
)
def test_a_bad_people_file_stops_the_start_naming_the_entry(tmp_path, text, says):
    path = tmp_path / "people.toml"
    path.write_text(text)
    done = subprocess.run(
        [sys.executable, "-m", "elicitation_gateway", "--port", "0"],
        env={"GATEWAY_PEOPLE": str(path), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "invalid setting people (GATEWAY_PEOPLE)" in done.stderr
    assert says in done.stderr
    assert "listening" not in done.stdout.lower()


def test_a_missing_people_file_stops_the_start(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "elicitation_gateway", "--port", "0"],
        env={"GATEWAY_PEOPLE": str(tmp_path / "nope.toml"), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert f"people file {tmp_path / 'nope.toml'} cannot be read" in done.stderr


async def test_sighup_reads_the_people_file_again(people_file):
    with gateway_process("--port", "0", env={"GATEWAY_PEOPLE": str(people_file)}) as (process, url):
        async with httpx.AsyncClient(base_url=url, timeout=10) as http:

            async def status(user: str, password: str) -> int:
                return (await http.get("/question", auth=(user, password))).status_code

            async def after_sighup(expect: tuple[str, str, int]) -> None:
                process.send_signal(signal.SIGHUP)
                for _ in range(200):  # the handler runs on the loop soon after the signal
                    if await status(*expect[:2]) == expect[2]:
                        return
                    await asyncio.sleep(0.05)
                raise AssertionError(f"{expect} after SIGHUP")

            assert await status("carol", "carol-pass") == 200
            people_file.write_text(
                PEOPLE.replace("carol-pass", "carol-new") + '[people.dave]\npassword = "d"\n'
            )
            await after_sighup(("dave", "d", 200))
            assert await status("carol", "carol-new") == 200
            assert await status("carol", "carol-pass") == 401
            assert await status("alice", "alice-pass") == 200

            # A file that cannot be used keeps the people read before, and says so in the log.
            people_file.write_text('[people.dave]\npasword = "typo"\n')
            process.send_signal(signal.SIGHUP)
            await asyncio.sleep(0.5)
            assert await status("dave", "d") == 200
            assert await status("carol", "carol-new") == 200
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=30)
    assert "people.dave.pasword: unknown key; the people read before stay" in output
    assert process.returncode is not None
    with reaped(process):
        pass


async def test_hash_password_makes_a_hash_the_people_file_takes(make_server, tmp_path):
    made = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "elicitation_gateway", "hash-password"],
        input="pässword 🔑\n",
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    hashed = made.stdout.strip()
    assert hashed.startswith("$argon2id$")
    assert "pässword" not in made.stdout
    path = tmp_path / "people.toml"
    path.write_text(f'[people.erin]\npassword = "{hashed}"\n')
    server = make_server(people=path)
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
        assert (await http.get("/question", auth=("erin", "pässword 🔑"))).status_code == 200
        assert (await http.get("/question", auth=("erin", "pässword"))).status_code == 401


def test_hash_password_refuses_an_empty_password():
    done = subprocess.run(
        [sys.executable, "-m", "elicitation_gateway", "hash-password"],
        input="\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "the password is empty" in done.stderr
