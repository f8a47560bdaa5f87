"""What the gateway writes to its log: the soft question limit, and one line per outcome."""

import logging

from tests.helpers import ask, form, pending, text_properties


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
