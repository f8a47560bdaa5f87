"""What the gateway writes to its log: the soft question limit, and one line per outcome."""

import asyncio
import base64
import logging
from urllib.parse import quote

import httpx
import pytest

from tests.helpers import ask, form, pending, read_events, text_properties
from tests.processes import GatewayProcess


async def test_more_than_ten_questions_are_asked_with_a_warning(client, caplog):
    caplog.set_level(logging.INFO, logger="elicitation_gateway.gateway")
    created = await client.post("/elicitations", json=form(text_properties(11)))
    assert created.status_code == 201
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert created.json()["id"] in warnings[0].getMessage()
    assert "11 questions" in warnings[0].getMessage()


async def test_ten_questions_are_asked_without_a_warning(client, caplog):
    caplog.set_level(logging.INFO, logger="elicitation_gateway.gateway")
    assert (await client.post("/elicitations", json=form(text_properties(10)))).status_code == 201
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


async def test_each_outcome_is_logged_once_with_its_id(client, caplog):
    caplog.set_level(logging.INFO, logger="elicitation_gateway.gateway")
    tool = ask(client, form(text_properties(1)))
    [request] = await pending(client)
    await client.post(f"/question/{request['id']}/reply", json={"answers": [["hi"]]})
    assert (await tool).json()["action"] == "accept"
    lines = [r.getMessage() for r in caplog.records if request["id"] in r.getMessage()]
    assert len([line for line in lines if "answered" in line]) == 1


# ---------------------------------------------------------------------------------------------------
# Credentials never reach the log


TOOL_TOKEN = "tool-token-Zq8Wm3"
PASSWORD = "answerer-pass-Kx7Vb2"
WRONG = "wrong-secret-Jh4Tn9"


def secret_forms(secret: str) -> set[str]:
    """A secret as a log line could hold it: as it is, in base64 (alone and as ``user:secret``), and
    percent-encoded."""
    forms = {secret}
    for user in ("", "opencode:"):
        encoded = base64.b64encode(f"{user}{secret}".encode()).decode()
        forms |= {encoded, encoded.rstrip("="), quote(encoded, safe="")}
    return forms


def basic(password: str) -> str:
    return base64.b64encode(f"opencode:{password}".encode()).decode()


@pytest.mark.parametrize("log_format", ["text", "json"])
async def test_no_credential_reaches_the_log_at_any_level(tmp_path, log_format):
    """Every form a credential is sent in (the tool token as a Bearer header, the answerer's Basic
    header, ``?auth_token=``, a query parameter of any name, right or wrong, on routes that take it and
    routes that refuse it), with the log at DEBUG: none of them is in the log, in any encoding."""
    gateway = GatewayProcess(
        f"credentials-{log_format}",
        tmp_path,
        env={
            "GATEWAY_LOG_LEVEL": "debug",
            "GATEWAY_LOG_FORMAT": log_format,
            "GATEWAY_TOOL_TOKEN": TOOL_TOKEN,
            "OPENCODE_SERVER_PASSWORD": PASSWORD,
        },
    ).start()
    try:
        tool = {"Authorization": f"Bearer {TOOL_TOKEN}"}
        answerer = {"Authorization": f"Basic {basic(PASSWORD)}"}
        async with httpx.AsyncClient(base_url=gateway.url, timeout=30) as client:
            asked = asyncio.create_task(client.post("/elicit", json=form(text_properties(1)), headers=tool))
            async with read_events(client, headers=answerer) as events:
                while (frame := await events.next()).type != "question.asked":
                    pass
            for query in (
                {"auth_token": basic(PASSWORD)},
                {"auth_token": basic(WRONG)},
                {"token": TOOL_TOKEN, "directory": "/srv/x"},
            ):
                await client.get("/question", params=query)
            async with read_events(client, path="/event", params={"auth_token": basic(PASSWORD)}) as events:
                await events.next()
            for headers in (
                {"Authorization": f"Bearer {WRONG}"},
                {"Authorization": f"Basic {basic(WRONG)}"},
                {"Authorization": f"Bearer {TOOL_TOKEN}"},  # the tool token on the answerer's side
            ):
                await client.get("/question", headers=headers)
                await client.get("/elicitations/que_none", headers=headers)
            reply = f"/question/{frame.properties['id']}/reply"
            answered = await client.post(
                reply, json={"answers": [["yes"]]}, params={"auth_token": basic(PASSWORD)}
            )
            assert answered.status_code == 200, answered.text
            assert (await asked).json()["action"] == "accept"
            mcp = {**tool, "Accept": "application/json, text/event-stream"}
            initialize = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "1"},
                },
            }
            assert (await client.post("/mcp", json=initialize, headers=mcp)).status_code == 200
            # Refused before any route: a URL too long, with the password in it.
            long_query = {"auth_token": basic(PASSWORD), "pad": "p" * 9000}
            assert (await client.get("/question", params=long_query)).status_code == 414
    finally:
        gateway.terminate()
    log = gateway.output.read_text()
    assert "/question/que_" in log  # the access lines are there, with their paths
    assert "auth_token" not in log
    for secret in (TOOL_TOKEN, PASSWORD, WRONG):
        for written in secret_forms(secret):
            assert written not in log, f"{written!r} is in the log"
