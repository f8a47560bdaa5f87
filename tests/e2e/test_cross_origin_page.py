"""Hostile pages in a real browser (headless Chromium) against a real gateway: a page on another origin
that posts forms and ``no-cors`` fetches at a question, and a page that DNS rebinding has pointed at
the gateway. Neither answers, rejects, asks nor reads anything; the gateway's own page still answers.

The attacker's page is served by a second HTTP server on loopback, under names that are no local
origin (``localhost``, ``127.0.0.1`` and ``[::1]`` on any port are, and may call the gateway as OpenCode
lets them): ``evil.example``, a domain name as any page on the web has, which Chromium resolves to
127.0.0.1 (``--host-resolver-rules``); and ``127.0.0.2``, another page on this machine. Chromium's own
Local Network Access checks, which keep pages on public addresses from loopback, are off: Firefox
and Safari have none, and only the gateway may stand between such a page and the questions. Each
attack's response is checked to be the gateway's ``403``: every request reached it.
"""

import contextlib
import http.server
import json
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
import pytest_asyncio
from playwright.async_api import Browser, Page, Route, async_playwright

from tests.conftest import RunningServer
from tests.e2e.test_web_page import CHROMIUM, CHROMIUM_ARGS, require_chromium
from tests.helpers import EventReader, Frame, ask, form, pending, read_events

pytestmark = pytest.mark.asyncio(loop_scope="module")

RESOLVER_RULES = "--host-resolver-rules=MAP evil.example 127.0.0.1, MAP rebound.example 127.0.0.1"
NO_LOCAL_NETWORK_CHECKS = "--disable-features=LocalNetworkAccessChecks"
DEPLOY = {"type": "object", "properties": {"go": {"type": "string", "title": "Go", "enum": ["yes", "no"]}}}
QUESTION = "Deploy release 4.2 now?"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser() -> AsyncIterator[Browser]:
    require_chromium()
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(
            executable_path=str(CHROMIUM),
            args=[*CHROMIUM_ARGS, RESOLVER_RULES, NO_LOCAL_NETWORK_CHECKS],
            headless=True,
        )
        yield launched
        await launched.close()


@pytest_asyncio.fixture(loop_scope="module")
async def new_page(browser: Browser) -> AsyncIterator[Any]:
    contexts = []

    async def open_page() -> Page:
        context = await browser.new_context()
        contexts.append(context)
        return await context.new_page()

    yield open_page
    for context in contexts:
        await context.close()


class AttackerSite:
    """The attacker's web server: one page, whatever the test puts there."""

    def __init__(self, address: str) -> None:
        self.html = b""
        site = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(site.html)))
                self.end_headers()
                self.wfile.write(site.html)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer((address, 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextlib.contextmanager
def attacker_site(address: str) -> Iterator[AttackerSite]:
    site = AttackerSite(address)
    try:
        yield site
    finally:
        site.close()


def attack_page(gateway: str, request_id: str) -> str:
    """Forms and fetches a page may send anywhere without a CORS preflight. The ``text/plain`` form
    writes ``name=value``: a name that opens a JSON object and a value that closes it give a JSON body."""
    reply = json.dumps({"answers": [["yes"]], "pad": "x"})
    ask_form = json.dumps({"message": "Wire the money?", "requestedSchema": DEPLOY, "pad": "x"})

    def json_field(text: str) -> str:
        """``{..., "pad": "`` as the name and ``x"}`` as the value: ``{..., "pad": "=x"}``."""
        cut = text.rindex('x"}')
        return f"<input type=hidden name='{text[:cut]}' value='{text[cut:]}'>"

    return f"""<!doctype html><title>Totally harmless</title>
<iframe name="sink"></iframe>
<form id="reply" method="post" enctype="text/plain" target="sink"
      action="{gateway}/question/{request_id}/reply">{json_field(reply)}</form>
<form id="reject" method="post" enctype="text/plain" target="sink"
      action="{gateway}/question/{request_id}/reject"></form>
<form id="ask" method="post" enctype="text/plain" target="sink"
      action="{gateway}/elicitations">{json_field(ask_form)}</form>
<form id="decline" method="post" enctype="application/x-www-form-urlencoded" target="sink"
      action="{gateway}/question/{request_id}/reject"><input name="action" value="decline"></form>
"""


FORMS = ("reply", "reject", "ask", "decline")
FETCHES = [
    ("/question/{id}/reply", {"answers": [["yes"]]}),
    ("/question/{id}/reject", None),
    ("/elicit?timeout=5", {"message": "Wire the money?", "requestedSchema": DEPLOY}),
]


async def gateway_response(page: Page, url: str, action: str, *, readable: bool = True) -> tuple[int, Any]:
    """The status of the gateway's response to what ``action`` makes the page send, as the browser
    received it, and its error code where the browser keeps the body (it drops a ``no-cors``
    response's JSON body: Opaque Response Blocking)."""
    async with page.expect_response(lambda response: response.url == url) as caught:
        await page.evaluate(action)
    response = await caught.value
    if not readable:
        return response.status, None
    answer = await response.json()
    return response.status, answer["error"] if isinstance(answer, dict) else answer


@contextlib.asynccontextmanager
async def a_question_nobody_else_touches(server: RunningServer, new_page: Any) -> AsyncIterator[str]:
    """A tool waiting on one question, and a stream open on it. After the block the question is still
    the only one and still pending; the person answers it on the gateway's own page, the tool gets that
    answer, and the stream's first event since it was asked is that reply."""
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        tool = ask(client, form(DEPLOY, QUESTION))
        [request] = await pending(client)
        async with read_events(client) as events:
            assert (await next_question_event(events)).properties["id"] == request["id"]
            yield request["id"]
            assert [q["id"] for q in (await client.get("/question")).json()] == [request["id"]]
            assert (await client.get(f"/elicitations/{request['id']}")).json()["status"] == "pending"

            page = await new_page()
            await page.goto(server.url)
            card = page.locator("article.card").filter(has=page.get_by_role("heading", name=QUESTION))
            await card.get_by_role("radio", name="yes").check()
            await card.get_by_role("button", name="Submit").click()
            assert (await tool).json() == {"action": "accept", "content": {"go": "yes"}}
            replied = await next_question_event(events)
            assert (replied.type, replied.properties["requestID"]) == ("question.replied", request["id"])


async def next_question_event(events: EventReader) -> Frame:
    while (frame := await events.next()).type == "server.heartbeat":
        pass
    return frame


@pytest.mark.parametrize(
    ("address", "site_host"),
    [("127.0.0.1", "evil.example"), ("127.0.0.2", "127.0.0.2")],
    ids=["a page on the web", "another page on this machine"],
)
async def test_a_page_on_another_origin_cannot_answer_reject_or_ask(server, new_page, address, site_host):
    async with a_question_nobody_else_touches(server, new_page) as request_id:
        with attacker_site(address) as site:
            site.html = attack_page(server.url, request_id).encode()
            page = await new_page()
            await page.goto(f"http://{site_host}:{site.port}/")
            statuses = {}
            for form_id in FORMS:
                # getAttribute: the decline form's field named "action" hides form.action
                action = await page.evaluate(f"document.getElementById('{form_id}').getAttribute('action')")
                submit = f"document.getElementById('{form_id}').submit()"
                statuses[f"form {form_id}"] = await gateway_response(page, action, submit)
            for path, body in FETCHES:
                url = server.url + path.format(id=request_id)
                init = {"method": "POST", "mode": "no-cors"}
                if body is not None:
                    init |= {"headers": {"Content-Type": "text/plain"}, "body": json.dumps(body)}
                sent = f"fetch({json.dumps(url)}, {json.dumps(init)}).then(() => null)"
                statuses[f"fetch {path}"] = await gateway_response(page, url, sent, readable=False)
            assert statuses == {
                **{f"form {form_id}": (403, "cross_origin") for form_id in FORMS},
                **{f"fetch {path}": (403, None) for path, _ in FETCHES},
            }


async def test_a_page_dns_rebinding_points_at_the_gateway_reads_and_changes_nothing(server, new_page):
    """After rebinding, the attacker's page at http://rebound.example:PORT talks to the gateway as its
    own origin: the browser sends its requests as same-origin, with ``Host: rebound.example:PORT``.
    That state is made here by serving the attacker's document for that address from the test (the
    page's own requests still go to the network, which resolves the name to the gateway)."""
    async with a_question_nobody_else_touches(server, new_page) as request_id:
        rebound = f"http://rebound.example:{server.port}"
        page = await new_page()
        straight = await page.goto(f"{rebound}/")
        assert straight is not None
        assert straight.status == 421  # the gateway's page is not served under that name

        async def attacker_document(route: Route) -> None:
            await route.fulfill(
                status=200, content_type="text/html", body="<!doctype html><title>rebound</title>"
            )

        await page.route(f"{rebound}/", attacker_document)
        await page.goto(f"{rebound}/")
        read = await page.evaluate(
            """async (id) => {
                const list = await fetch("/question");
                const reply = await fetch(`/question/${id}/reply`, {
                    method: "POST", headers: {"Content-Type": "application/json"},
                    body: JSON.stringify({answers: [["yes"]]}),
                });
                const stream = await fetch("/event");
                return [[list.status, await list.text()], [reply.status, await reply.text()], stream.status];
            }""",
            request_id,
        )
        (list_status, listed), (reply_status, replied), stream_status = read
        assert (list_status, json.loads(listed)["error"]) == (421, "host_not_allowed")
        assert request_id not in listed
        assert (reply_status, json.loads(replied)["error"]) == (421, "host_not_allowed")
        assert stream_status == 421
