"""One-tap links (:mod:`elicitation_gateway.links`): ``GET /link/{token}`` shows a small page with the
question and one button and changes nothing (link previews and mail scanners fetch links);
``POST /link/{token}``, the button's form, answers as the link's person.

The signed token is the credential: neither route asks for a login. Both answer with HTML, for a
person in a browser: a refused link gets a page saying why, with a ``4xx`` status. A browser's ``POST``
from any page but the gateway's own is refused before it gets here (``BrowserGuard``), as every
change a page asks for is. The token never appears in the log (the access line shows ``/link/…``).
"""

import base64
import hashlib
import html
import logging
import time
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from elicitation_gateway import links
from elicitation_gateway.conversion.answers import AnswerError
from elicitation_gateway.display import safe
from elicitation_gateway.gateway import Gateway, NotFound
from elicitation_gateway.links import Link, LinkError
from elicitation_gateway.people import People, Viewer
from elicitation_gateway.records import Record
from elicitation_gateway.settings import Settings

logger = logging.getLogger(__name__)

VIA = "link"
"""How a one-tap answer came: the reply's channel, for the audit trail."""

_STYLE = (
    "body{font:16px/1.5 system-ui,sans-serif;max-width:34rem;margin:2rem auto;padding:0 1rem}"
    "pre{white-space:pre-wrap;font:inherit}"
    "button{font:inherit;padding:.6rem 1.2rem;border-radius:.4rem;border:1px solid;cursor:pointer}"
)
_STYLE_HASH = base64.b64encode(hashlib.sha256(_STYLE.encode()).digest()).decode()
PAGE_HEADERS = {
    # No script at all; the one inline style by its hash; the form posts only to this gateway.
    "Content-Security-Policy": (
        f"default-src 'none'; style-src 'sha256-{_STYLE_HASH}'; base-uri 'none'; "
        "form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",  # the page's address holds the token
    "Cache-Control": "no-store",
}

PROBLEM_STATUS = {"malformed": 400, "forged": 403, "expired": 410}


@dataclass(frozen=True)
class _Refused(Exception):
    status: int
    title: str
    text: str


def link_secret(settings: Settings) -> bytes:
    """The secret this gateway signs and checks links with; without ``GATEWAY_LINK_SECRET`` where
    links are made (people and a public URL), a warning that they last only as long as this process."""
    if settings.link_secret is None and settings.people is not None and settings.public_url:
        logger.warning(
            "one-tap links are signed with a secret of this process: they stop working when it restarts, "
            "and other replicas refuse them; set GATEWAY_LINK_SECRET"
        )
    return links.secret_of(settings.link_secret)


def _gateway(request: Request) -> Gateway:
    return request.app.state.gateway


def _secret(request: Request) -> bytes:
    return request.app.state.link_secret


def _page(title: str, body: str, status: int = 200) -> Response:
    document = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="referrer" content="no-referrer">'
        f"<title>{html.escape(title)} · Elicitation Gateway</title><style>{_STYLE}</style></head>"
        f"<body><main><h1>{html.escape(title)}</h1>{body}</main></body></html>"
    )
    return HTMLResponse(document, status_code=status, headers=PAGE_HEADERS)


def _paragraph(text: str) -> str:
    return f"<p>{html.escape(text)}</p>"


def _refusal(refused: _Refused) -> Response:
    return _page(refused.title, _paragraph(refused.text), refused.status)


def _checked(request: Request) -> Link:
    try:
        return links.check(request.path_params["token"], _secret(request), time.time())
    except LinkError as error:
        status = PROBLEM_STATUS[error.problem]
        title = "This link has expired" if error.problem == "expired" else "This link does not work"
        raise _Refused(status, title, error.message + ".") from None


def _people(request: Request, link: Link) -> People:
    """The people file as it is now, which must still list the link's person."""
    people_file = getattr(request.app.state, "people", None)
    if people_file is None or link.person not in people_file.current.persons:
        raise _Refused(403, "This link does not work", "Its person is no longer one who may answer here.")
    return people_file.current


def _not_found() -> _Refused:
    return _Refused(404, "No such question", "The gateway knows no such question now.")


def _over(record: Record | None) -> _Refused:
    """What happened to a question that is no longer pending, in the words of its status."""
    if record is None:
        return _Refused(410, "This question is over", "It has ended: a link works once, and ends with it.")
    by = (record.result or {}).get("answeredBy")
    who = f" by {by}" if isinstance(by, str) else ""
    said = {
        "answered": f"It was answered{who}.",
        "declined": f"It was declined{who}.",
        "cancelled": "It was withdrawn or dismissed.",
        "expired": "It expired unanswered.",
    }.get(record.status, "It has ended.")
    return _Refused(410, "This question is over", f"{said} A link works once, and ends with its question.")


def _label(record: Record, link: Link) -> str:
    labels = links.choices(record)
    if labels is None or link.choice >= len(labels):
        raise _Refused(400, "This link does not work", "It names no choice of this question.")
    return labels[link.choice]


async def _pending(request: Request, link: Link) -> tuple[Record, str, Viewer]:
    """The link's question, pending and addressed to its person, the label of its choice, and the
    person as a viewer. Read only: a question past its expiry is shown as over, and left to its
    timer."""
    people = _people(request, link)
    record = await _gateway(request).store.get(link.question)
    if record is None:
        raise _not_found()
    if not record.pending or record.expires_at <= time.time():
        if record.pending:
            raise _Refused(410, "This question is over", "It expired unanswered.")
        raise _over(record)
    viewer = Viewer(link.person, people)
    if not viewer.sees(record.request.to):
        raise _not_found()
    return record, _label(record, link), viewer


async def show(request: Request) -> Response:
    """The question and one button; nothing changes."""
    try:
        link = _checked(request)
        record, label, _ = await _pending(request, link)
    except _Refused as refused:
        return _refusal(refused)
    question = record.request.questions[0].question
    asker = _paragraph(f"Asked by {safe(record.asker, oneline=True)}") if record.asker else ""
    body = (
        f"{asker}<pre>{html.escape(safe(question))}</pre>"
        f"<p>Answering as {html.escape(link.person)}.</p>"
        '<form method="post">'
        f'<button type="submit">Answer {html.escape(safe(label, oneline=True))}</button></form>'
    )
    return _page("Answer with one tap", body)


async def answer(request: Request) -> Response:
    """Answers the link's question with its choice, as its person."""
    gateway = _gateway(request)
    try:
        link = _checked(request)
        record, label, viewer = await _pending(request, link)
        try:
            await gateway.reply(record.id, [[label]], viewer, via=VIA)
        except NotFound as error:  # someone else finished it first
            if error.status is None:
                raise _not_found() from None
            raise _over(await gateway.store.get(record.id)) from None
        except AnswerError as error:
            raise _Refused(400, "This link does not work", error.message) from None
    except _Refused as refused:
        return _refusal(refused)
    logger.info("elicitation %s answered by %s through a one-tap link", record.id, link.person)
    shown = html.escape(safe(label, oneline=True))
    return _page("Answered", f"<p>You answered <strong>{shown}</strong>. You may close this page.</p>")
