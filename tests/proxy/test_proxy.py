"""``elicitation-gateway proxy`` with a real ``mcp`` client that has no elicitation callback, in both
protocol eras, in front of a real upstream over stdio and over Streamable HTTP, while a person answers
over the gateway's HTTP API."""

import re
from collections.abc import Callable
from typing import Any

import anyio
import httpx
import pytest
from mcp import StdioServerParameters
from mcp.client import Client
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CallToolRequest,
    CallToolRequestParams,
    CallToolResult,
    ElicitResult,
    InputRequiredResult,
    ToolListChangedNotification,
)

from tests.conftest import RunningServer
from tests.helpers import until
from tests.processes import ROOT
from tests.proxy.conftest import DIRECTORY, UPSTREAM, WHO, HttpUpstream, Proxy, nothing_pending, question
from tests.proxy.upstream import (
    CLEAN_MESSAGE,
    LINK_MESSAGE,
    LINK_URL,
    ORDER_MESSAGE,
    REGION_MESSAGE,
    STOCK_CONTENT,
    STOCK_SCHEMA,
    WIPE_MESSAGE,
)

pytestmark = pytest.mark.timeout(120)
ERAS = ["legacy", "2026-07-28"]


@pytest.fixture(params=["stdio", "http"])
def upstream(request: pytest.FixtureRequest, http_upstream: Callable[..., HttpUpstream]) -> list[str] | str:
    """The upstream as the proxy is told of it: a command, or a URL."""
    return UPSTREAM if request.param == "stdio" else http_upstream().url


async def progress_of(
    client: Client, name: str, arguments: dict[str, Any], count: int
) -> list[tuple[float, float | None, str | None]]:
    seen: list[tuple[float, float | None, str | None]] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append((value, total, message))

    await client.call_tool(name, arguments, progress_callback=progress)
    await until(lambda: len(seen) == count, what="the upstream's progress")
    return seen


async def counts(gateway: httpx.AsyncClient) -> tuple[float, float]:
    """The gateway's questions asked and answered so far, from ``/metrics``."""
    metrics = (await gateway.get("/metrics")).text
    asked = re.search(r"^gateway_elicitations_asked_total (\S+)$", metrics, re.MULTILINE)
    answered = re.search(
        r'^gateway_elicitations_finished_total\{outcome="answered"\} (\S+)$', metrics, re.MULTILINE
    )
    return float(asked[1]) if asked else 0.0, float(answered[1]) if answered else 0.0


def text(result: Any) -> str:
    assert not result.is_error, result
    return result.content[0].text


async def test_what_the_upstream_offers_passes_through_unchanged(
    server: RunningServer, proxy: Proxy, upstream: list[str] | str
):
    direct_target = upstream if isinstance(upstream, str) else None
    for era in ERAS:
        async with proxy.client(server.url, era=era, upstream=upstream) as through:
            if direct_target is None:
                direct_target = StdioServerParameters(
                    command=UPSTREAM[0], args=UPSTREAM[1:], cwd=proxy.parameters("x").cwd
                )
            async with Client(direct_target, mode=era) as direct:
                assert through.server_info == direct.server_info
                assert through.instructions == direct.instructions
                assert (await through.list_tools()).tools == (await direct.list_tools()).tools
                assert (await through.list_prompts()).prompts == (await direct.list_prompts()).prompts
                assert (await through.list_resources()).resources == (await direct.list_resources()).resources
                quote = {"part": "hose", "quantity": 2}
                assert await through.call_tool("quote", quote) == await direct.call_tool("quote", quote)
                failed = await through.call_tool("fail", {"reason": "no stock"})
                assert failed == await direct.call_tool("fail", {"reason": "no stock"})
                assert failed.is_error
                prompt = await through.get_prompt("checklist", {"machine": "SY215C"})
                assert (
                    prompt.messages == (await direct.get_prompt("checklist", {"machine": "SY215C"})).messages
                )
                read = await through.read_resource("parts://catalogue")
                assert read.contents == (await direct.read_resource("parts://catalogue")).contents

                seen = await progress_of(through, "slow_count", {"steps": 3}, count=3)
                assert seen == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]
    assert (await httpx.AsyncClient(base_url=server.url).get("/question")).json() == []


@pytest.mark.parametrize("era", ERAS)
async def test_a_result_that_breaks_the_tools_output_schema_passes_through_unchanged(
    server: RunningServer, proxy: Proxy, era: str
):
    """Checking a result against the tool's output schema is the client's part: the proxy passes the
    upstream's on as it came, so the client's own check sees what the upstream sent."""
    upstream = StdioServerParameters(command=UPSTREAM[0], args=UPSTREAM[1:], cwd=ROOT)
    stock = CallToolRequest(params=CallToolRequestParams(name="stock", arguments={"part": "hose"}))
    async with proxy.client(server.url, era=era) as through, Client(upstream, mode=era) as direct:
        listed = {tool.name: tool for tool in (await through.list_tools()).tools}
        assert listed["stock"].output_schema == STOCK_SCHEMA
        # The request as a client that does not check sends it: the result, not the client's verdict.
        result = await through.session.send_request(stock, CallToolResult)
        assert result.structured_content == STOCK_CONTENT
        assert not result.is_error
        assert result == await direct.session.send_request(stock, CallToolResult)
        with pytest.raises(RuntimeError, match="Invalid structured content returned by tool stock") as seen:
            await through.call_tool("stock", {"part": "hose"})
        with pytest.raises(RuntimeError) as seen_direct:
            await direct.call_tool("stock", {"part": "hose"})
        # The same verdict on the same content (the schema it quotes may list its keys in another order).
        for words in (str(seen.value), str(seen_direct.value)):
            assert words.startswith("Invalid structured content returned by tool stock: 'depot' is")
            assert words.endswith(f"On instance:\n    {STOCK_CONTENT}")


async def test_in_the_newer_era_only_resolver_questions_reach_the_proxy(server: RunningServer, proxy: Proxy):
    """``--upstream-era modern``: a resolver's question still comes (as an ``InputRequiredResult``); a
    push-style ``ctx.elicit`` has no way to the proxy, and the upstream's error reaches the client, as
    it would reach any client of that era. The default (``auto``) speaks 2025-11-25, where both come."""
    async with (
        proxy.client(server.url, "--upstream-era", "modern") as client,
        httpx.AsyncClient(base_url=server.url) as gateway,
        anyio.create_task_group() as tasks,
    ):
        results: list[str] = []

        async def call() -> None:
            results.append(text(await client.call_tool("deliver", {"machine": "SY215C"})))

        tasks.start_soon(call)
        asked = await question(gateway)
        await gateway.post(f"/question/{asked['id']}/reply", json={"answers": [["eu-west"]]})
        with pytest.raises(MCPError, match="no back-channel for server-initiated requests"):
            await client.call_tool("order_part", {})
    assert results == ["SY215C goes to eu-west"]
    assert "protocol 2026-07-28" in proxy.stderr()


async def test_directory_and_session_flags_place_the_question(server: RunningServer, proxy: Proxy):
    session = "ses_proxyflags"
    async with (
        proxy.client(server.url, "--directory", "/srv/plant-7", "--session-id", session) as client,
        httpx.AsyncClient(base_url=server.url) as gateway,
        anyio.create_task_group() as tasks,
    ):
        tasks.start_soon(client.call_tool, "order_part", {})
        asked = await question(gateway, directory="/srv/plant-7")
        assert asked["sessionID"] == session
        assert (await gateway.get("/question", params={"directory": DIRECTORY})).json() == []
        await gateway.post(f"/question/{asked['id']}/reject")


async def test_the_to_flag_asks_only_those_people(
    make_server: Callable[..., RunningServer], proxy: Proxy, tmp_path
):
    people = tmp_path / "people.toml"
    people.write_text('[people.alice]\npassword = "a"\ngroups = ["oncall"]\n[people.carol]\npassword = "c"\n')
    gateway_server = make_server(people=people)
    async with (
        proxy.client(gateway_server.url, "--to", "group:oncall") as client,
        httpx.AsyncClient(base_url=gateway_server.url, auth=("alice", "a")) as alice,
        httpx.AsyncClient(base_url=gateway_server.url, auth=("carol", "c")) as carol,
        anyio.create_task_group() as tasks,
    ):
        tasks.start_soon(client.call_tool, "order_part", {})
        asked = await question(alice)
        assert asked["to"] == ["group:oncall"]
        assert (await carol.get("/question")).json() == []
        await alice.post(f"/question/{asked['id']}/reject")


async def test_a_list_changed_notification_passes_through(server: RunningServer, proxy: Proxy):
    heard: list[Any] = []

    async def notifications(message: Any) -> None:
        heard.append(message)

    async with proxy.client(server.url, message_handler=notifications) as client:
        assert text(await client.call_tool("restock", {"part": "hose"})) == "order_hose added"
        await until(
            lambda: any(isinstance(m, ToolListChangedNotification) for m in heard), what="tools changed"
        )
        assert "order_hose" in [tool.name for tool in (await client.list_tools()).tools]
        assert text(await client.call_tool("order_hose", {})) == "hose ordered"


@pytest.mark.parametrize("era", ERAS)
async def test_push_and_resolver_questions_are_asked_once_each_and_answered_with_typed_content(
    server: RunningServer, proxy: Proxy, upstream: list[str] | str, era: str
):
    async with (
        proxy.client(server.url, era=era, upstream=upstream) as client,
        httpx.AsyncClient(base_url=server.url, timeout=10) as gateway,
    ):
        before = await counts(gateway)
        async with anyio.create_task_group() as tasks:
            results: dict[str, str] = {}

            async def call(name: str, arguments: dict[str, Any]) -> None:
                results[name] = text(await client.call_tool(name, arguments))

            tasks.start_soon(call, "order_part", {})
            asked = await question(gateway)
            assert asked["questions"][0]["question"].startswith(f"{WHO} · order_part: {ORDER_MESSAGE}")
            # In the upstream's directory: another directory's answerers do not see it.
            assert (await gateway.get("/question", params={"directory": "/srv/other"})).json() == []
            await gateway.post(f"/question/{asked['id']}/reply", json={"answers": [["hose"], ["2"], ["Yes"]]})
            await until(lambda: "order_part" in results, timeout=20, what="the tool's result")

            tasks.start_soon(call, "deliver", {"machine": "SY215C"})
            asked = await question(gateway)
            assert asked["questions"][0]["question"].startswith(f"{WHO} · deliver: {REGION_MESSAGE}")
            await gateway.post(f"/question/{asked['id']}/reply", json={"answers": [["us-east"]]})
        assert results == {
            "order_part": "ordered 2 hose (express: True)",
            "deliver": "SY215C goes to us-east",
        }
        await nothing_pending(gateway)
        assert await counts(gateway) == (before[0] + 2, before[1] + 2)  # each question asked once


@pytest.mark.parametrize(
    ("answer", "cleaned", "wiped"),
    [
        ("Yes", "cleaned up (content: {})", "SY215C: log wiped"),
        ("No", "kept the photos: decline", "SY215C: log kept (decline)"),
    ],
)
async def test_a_plain_confirmation_is_asked_yes_or_no_and_answered_as_the_upstream_expects(
    server: RunningServer, proxy: Proxy, upstream: list[str] | str, answer: str, cleaned: str, wiped: str
):
    """FastMCP 2.x's ``{"type": "object", "properties": {}}`` (push-style, the legacy era) and a resolver's
    confirmation (an empty model, the 2026-07-28 era): one Yes/No question showing the message; Yes
    accepts with empty content, No declines."""
    cases = [
        ("legacy", "clean_up", {}, CLEAN_MESSAGE, cleaned),
        ("2026-07-28", "wipe_log", {"machine": "SY215C"}, WIPE_MESSAGE, wiped),
    ]
    for era, tool, arguments, message, expected in cases:
        async with (
            proxy.client(server.url, era=era, upstream=upstream) as client,
            httpx.AsyncClient(base_url=server.url, timeout=10) as gateway,
        ):
            results: list[str] = []

            async def call(
                tool: str = tool, arguments: dict[str, Any] = arguments, results: list[str] = results
            ) -> None:
                results.append(text(await client.call_tool(tool, arguments)))

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(call)
                asked = await question(gateway)
                [shown] = asked["questions"]
                assert shown["question"] == f"{WHO} · {tool}: {message}"
                assert [option["label"] for option in shown["options"]] == ["Yes", "No"]
                assert shown["custom"] is False
                reply = await gateway.post(f"/question/{asked['id']}/reply", json={"answers": [[answer]]})
                assert reply.status_code == 200, reply.text
            assert results == [expected]
            await nothing_pending(gateway)


@pytest.mark.parametrize("era", ERAS)
async def test_decline_dismiss_and_expiry_reach_the_upstream_as_it_expects(
    server: RunningServer, proxy: Proxy, era: str
):
    async with (
        proxy.client(server.url, era=era) as client,
        httpx.AsyncClient(base_url=server.url, timeout=10) as gateway,
    ):
        results: list[str] = []

        async def call() -> None:
            results.append(text(await client.call_tool("order_part", {})))

        for body in ({"action": "decline"}, None):
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(call)
                asked = await question(gateway)
                await gateway.post(f"/question/{asked['id']}/reject", json=body)
        assert results == ["no order: decline", "no order: cancel"]
    async with proxy.client(server.url, "--timeout", "1", era=era) as client:
        assert text(await client.call_tool("order_part", {})) == "no order: cancel"
    async with proxy.client(server.url, "--timeout", "1", "--on-timeout", "default", era=era) as client:
        assert text(await client.call_tool("plan_shift", {})) == "shift of 8 hours (night: False)"
    async with httpx.AsyncClient(base_url=server.url) as gateway:
        await nothing_pending(gateway)


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("tool", ["order_part", "stubborn_order"])
async def test_a_call_the_client_cancels_withdraws_its_question(
    server: RunningServer, proxy: Proxy, upstream: list[str] | str, era: str, tool: str
):
    """Whether or not the upstream gives up its own question when the call is cancelled."""
    async with (
        proxy.client(server.url, era=era, upstream=upstream) as client,
        httpx.AsyncClient(base_url=server.url, timeout=10) as gateway,
    ):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(client.call_tool, tool, {})
            await question(gateway)
            tasks.cancel_scope.cancel()
        await nothing_pending(gateway)
        # The proxy and the upstream carry on.
        assert text(await client.call_tool("quote", {"part": "track"})).startswith("{")


async def test_with_the_gateway_down_questions_are_cancelled_said_once_and_other_tools_work(proxy: Proxy):
    down = "http://127.0.0.1:9"
    async with proxy.client(down) as client:
        assert text(await client.call_tool("order_part", {})) == "no order: cancel"
        assert text(await client.call_tool("deliver", {"machine": "SY215C"})) == "SY215C stays: cancel"
        assert text(await client.call_tool("quote", {"part": "hose"})).startswith("{")
    said = [line for line in proxy.stderr().splitlines() if "cannot reach the gateway" in line]
    assert len(said) == 1, proxy.stderr()
    assert down in said[0]


async def test_a_refused_token_cancels_the_question_and_says_why(
    make_server: Callable[..., RunningServer], proxy: Proxy
):
    server = make_server(tool_token="right-token")
    async with proxy.client(server.url, "--token", "wrong-token") as client:
        assert text(await client.call_tool("order_part", {})) == "no order: cancel"
    assert "refused the token (401)" in proxy.stderr()
    async with (
        proxy.client(server.url, env={"GATEWAY_TOOL_TOKEN": "right-token"}) as client,
        httpx.AsyncClient(base_url=server.url) as gateway,
        anyio.create_task_group() as tasks,
    ):
        tasks.start_soon(client.call_tool, "order_part", {})
        asked = await question(gateway)
        await gateway.post(f"/question/{asked['id']}/reject", json={"action": "decline"})


@pytest.mark.parametrize("era", ERAS)
async def test_an_upstream_that_exits_mid_call_gives_the_client_a_clear_error(
    server: RunningServer, proxy: Proxy, era: str
):
    crashing = [*UPSTREAM, "--crash-on", "order_part"]
    async with proxy.client(server.url, era=era, upstream=crashing) as client:
        with anyio.fail_after(30):
            with pytest.raises(MCPError, match="upstream MCP server Excavator Service is gone"):
                await client.call_tool("order_part", {})
            with pytest.raises(MCPError, match="is gone"):
                await client.call_tool("quote", {"part": "hose"})
    said = [line for line in proxy.stderr().splitlines() if "is gone" in line]
    assert len(said) == 1, proxy.stderr()


async def test_an_http_upstream_that_stops_answering_gives_the_client_a_clear_error(
    server: RunningServer, proxy: Proxy, http_upstream: Callable[..., HttpUpstream]
):
    remote = http_upstream()
    async with proxy.client(server.url, upstream=remote.url) as client:
        assert text(await client.call_tool("quote", {"part": "hose"})).startswith("{")
        remote.stop()
        with anyio.fail_after(30), pytest.raises(MCPError):
            await client.call_tool("quote", {"part": "hose"})


async def test_an_upstream_that_cannot_start_is_said_on_stderr(proxy: Proxy):
    with pytest.raises(Exception):  # noqa: B017, PT011  (the client's own error for a server that exited)
        async with proxy.client("http://127.0.0.1:9", upstream=["/nonexistent/mcp-server"]):
            pass
    assert "cannot connect to the upstream MCP server (/nonexistent/mcp-server)" in proxy.stderr()


@pytest.mark.parametrize("era", ERAS)
async def test_a_waiting_call_gets_progress_while_the_person_takes_their_time(
    server: RunningServer, proxy: Proxy, era: str
):
    seen: list[tuple[float, float | None, str | None]] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append((value, total, message))

    async with (
        proxy.client(server.url, "--progress-interval", "0.3", era=era) as client,
        httpx.AsyncClient(base_url=server.url) as gateway,
        anyio.create_task_group() as tasks,
    ):
        tasks.start_soon(lambda: client.call_tool("order_part", {}, progress_callback=progress))
        asked = await question(gateway)
        await until(lambda: len(seen) >= 3, what="three progress notifications")
        await gateway.post(f"/question/{asked['id']}/reject", json={"action": "decline"})
    values = [value for value, _, _ in seen]
    assert values == sorted(set(values)), values
    assert all("waiting for a person" in (message or "") for _, _, message in seen)


async def test_a_url_mode_question_shows_its_link(server: RunningServer, proxy: Proxy):
    async with proxy.client(server.url) as client, httpx.AsyncClient(base_url=server.url) as gateway:
        async with anyio.create_task_group() as tasks:
            results: list[str] = []

            async def call() -> None:
                results.append(text(await client.call_tool("link_account", {})))

            tasks.start_soon(call)
            asked = await question(gateway)
            shown = asked["questions"][0]["question"]
            assert LINK_MESSAGE in shown
            assert LINK_URL in shown
            await gateway.post(f"/question/{asked['id']}/reply", json={"answers": [["Yes"]]})
        assert results == ["link: accept"]


@pytest.mark.parametrize("era", ERAS)
async def test_answer_with_client_asks_a_client_that_can_answer_and_the_gateway_otherwise(
    server: RunningServer, proxy: Proxy, era: str
):
    """In the 2025-11-25 era the client gets ``elicitation/create`` requests; in the 2026-07-28 era
    ``InputRequiredResult`` rounds, which the ``mcp`` client answers through the same callback."""
    asked_client: list[str] = []

    async def person_at_the_ide(context: Any, params: Any) -> ElicitResult:
        asked_client.append(params.message)
        if "delivered" in params.message:
            return ElicitResult(action="decline")
        return ElicitResult(action="accept", content={"part": "bucket", "quantity": 1, "express": False})

    async with (
        proxy.client(
            server.url, "--answer-with", "client", era=era, elicitation_callback=person_at_the_ide
        ) as client,
        httpx.AsyncClient(base_url=server.url) as gateway,
    ):
        before = await counts(gateway)
        assert text(await client.call_tool("order_part", {})) == "ordered 1 bucket (express: False)"
        assert text(await client.call_tool("deliver", {"machine": "SY215C"})) == "SY215C stays: decline"
        assert text(await client.call_tool("quote", {"part": "hose"})).startswith("{")
        assert await counts(gateway) == before  # the gateway asked nothing
    assert asked_client == [ORDER_MESSAGE, REGION_MESSAGE]  # the upstream's own words, to the client

    async with (
        proxy.client(server.url, "--answer-with", "client", era=era) as client,
        httpx.AsyncClient(base_url=server.url) as gateway,
        anyio.create_task_group() as tasks,
    ):  # a client without the capability: the gateway asks
        tasks.start_soon(client.call_tool, "order_part", {})
        asked = await question(gateway, DIRECTORY)
        await gateway.post(f"/question/{asked['id']}/reject")


async def test_a_round_the_client_never_answers_is_given_up(server: RunningServer, proxy: Proxy):
    """2026-07-28, driven by hand: a client that takes an ``InputRequiredResult`` and never retries has
    given up; after ``--timeout`` the upstream's question is answered ``cancel``, and a late retry
    starts the call afresh."""

    async def never_called(context: Any, params: Any) -> ElicitResult:
        raise AssertionError("rounds are answered by hand here")

    async with proxy.client(
        server.url,
        "--answer-with",
        "client",
        "--timeout",
        "1",
        era="2026-07-28",
        elicitation_callback=never_called,
    ) as client:
        first = await client.session.call_tool("order_part", {}, allow_input_required=True)
        assert isinstance(first, InputRequiredResult)
        ((key, request),) = first.input_requests.items()
        assert request.params.message == ORDER_MESSAGE
        await anyio.sleep(2)
        late = await client.session.call_tool(
            "order_part",
            {},
            input_responses={key: ElicitResult(action="decline")},
            request_state=first.request_state,
            allow_input_required=True,
        )
        assert isinstance(late, InputRequiredResult)
        assert late.request_state != first.request_state
        answered = await client.session.call_tool(
            "order_part",
            {},
            input_responses={key: ElicitResult(action="decline")},
            request_state=late.request_state,
            allow_input_required=True,
        )
        assert answered.content[0].text == "no order: decline"


HOSTILE_NAME = "evil-mcp\x1b]0;pwned\x07\x1b[2K\x1b[1G\nTrusted CI\u202e"


async def test_an_upstreams_hostile_name_reaches_no_terminal_raw_and_is_shown_apart(
    server: RunningServer, proxy: Proxy
) -> None:
    """A ``serverInfo`` name with escape sequences and a newline: the proxy's stderr gets it made safe,
    on one line; the gateway gets it as ``asker``, apart from the message, and OpenCode clients see it
    without a control character."""
    upstream = [*UPSTREAM, "--name", HOSTILE_NAME, "--title", ""]
    async with (
        proxy.client(server.url, upstream=upstream) as client,
        httpx.AsyncClient(base_url=server.url, timeout=10) as gateway,
        anyio.create_task_group() as tasks,
    ):
        tasks.start_soon(client.call_tool, "order_part", {})
        asked = await question(gateway, directory=f"mcp:{HOSTILE_NAME}")
        form = (await gateway.get(f"/question/{asked['id']}/form")).json()
        assert form["asker"] == f"{HOSTILE_NAME} · order_part"
        assert form["message"] == ORDER_MESSAGE
        shown = asked["questions"][0]["question"]
        assert shown.startswith("evil-mcp]0;pwned[2K[1G\nTrusted CI⟨U+202E⟩ · order_part: ")
        assert not re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202e]", shown)
        await gateway.post(f"/question/{asked['id']}/reject")
    stderr = proxy.stderr()
    assert "\x1b" not in stderr
    assert "\x07" not in stderr
    started = [line for line in stderr.splitlines() if "protocol" in line]
    assert started, stderr
    assert "evil-mcp]0;pwned[2K[1G Trusted CI⟨U+202E⟩" in started[0]


async def test_a_megabyte_upstream_title_is_cut_and_questions_still_reach_a_person(
    server: RunningServer, proxy: Proxy
) -> None:
    upstream = [*UPSTREAM, "--title", "Huge", "--title-size", str(1024 * 1024)]
    async with (
        proxy.client(server.url, upstream=upstream) as client,
        httpx.AsyncClient(base_url=server.url, timeout=10) as gateway,
        anyio.create_task_group() as tasks,
    ):
        tasks.start_soon(client.call_tool, "order_part", {})
        asked = await question(gateway)
        form = (await gateway.get(f"/question/{asked['id']}/form")).json()
        assert form["asker"] == "Huge" + "x" * 95 + "… · order_part"
        await gateway.post(f"/question/{asked['id']}/reject")
    assert len(max(proxy.stderr().splitlines(), key=len)) < 400
