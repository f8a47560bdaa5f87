"""A pending request as the answerer sees it, and the answers a person is putting together for it.

Built from the gateway's ``GET /question/{id}/form``, which says what each question accepts. Plain
data and no I/O, so that the screen only draws what a :class:`Draft` holds and the reply it sends is
exactly :meth:`Draft.answers`.
"""

import time
from dataclasses import dataclass, field
from typing import Any

from elicitation_gateway.display import safe

CHOICE_KINDS = frozenset({"choice", "multi", "boolean"})
BOOLEAN_LABELS = ("Yes", "No")


@dataclass(frozen=True)
class Choice:
    label: str
    description: str = ""


@dataclass(frozen=True)
class Question:
    """One question of a request: what it asks, and what it accepts."""

    key: str
    kind: str
    header: str
    text: str
    hints: tuple[str, ...] = ()
    warning: str = ""
    """The gateway's caution when the question may ask for a secret, shown beside it."""
    required: bool = False
    choices: tuple[Choice, ...] = ()
    default_choices: frozenset[int] = frozenset()
    default_text: str = ""
    has_default: bool = False

    @property
    def free_text(self) -> bool:
        """Integers, numbers and text are typed; the other kinds pick from ``choices``."""
        return self.kind not in CHOICE_KINDS

    @property
    def multiple(self) -> bool:
        return self.kind == "multi"

    @classmethod
    def from_form(cls, described: dict[str, Any]) -> "Question":
        kind = str(described.get("kind", "text"))
        has_default = "default" in described
        default = described.get("default")
        if kind == "boolean":
            choices = tuple(Choice(label) for label in BOOLEAN_LABELS)
            values: list[Any] = [True, False]
        else:
            options = described.get("options") or []
            choices = tuple(Choice(str(o["label"]), str(o.get("description") or "")) for o in options)
            values = [o["value"] for o in options]
        defaults: set[int] = set()
        default_text = ""
        if has_default and kind in CHOICE_KINDS:
            wanted = default if kind == "multi" and isinstance(default, list) else [default]
            defaults = {values.index(v) for v in wanted if v in values}
        elif has_default:
            default_text = safe(_as_text(default))  # typed into the field, as shown: what is sent
        return cls(
            key=str(described["key"]),
            kind=kind,
            header=str(described.get("header") or described["key"]),
            text=str(described.get("text", described.get("question")) or ""),
            hints=tuple(str(hint) for hint in described.get("hints") or ()),
            warning=str(described.get("warning") or ""),
            required=bool(described.get("required", False)),
            choices=choices,
            default_choices=frozenset(defaults),
            default_text=default_text,
            has_default=has_default,
        )


@dataclass(frozen=True)
class RequestForm:
    """A pending request: its id, the tool's message, and its questions in order."""

    id: str
    message: str
    questions: tuple[Question, ...]
    asker: str = ""
    """Who asks, as the tool said (the proxy: ``server · tool``): shown apart from the message."""
    to: tuple[str, ...] = ()
    """Whom it is for, where the gateway has people: names and ``group:`` names."""
    expires_at: float | None = None
    """Seconds since the epoch."""
    on_timeout: str = "cancel"
    """What the tool gets at expiry: ``cancel``, or ``default`` (the defaults accepted)."""
    confirm: bool = False
    """A plain confirmation (a schema with no properties): one Yes/No question, sent once picked; Yes
    accepts, No declines."""

    @classmethod
    def from_form(cls, described: dict[str, Any]) -> "RequestForm":
        message = str(described.get("message") or "")
        questions = [Question.from_form(f) for f in described.get("fields", [])]
        expires_at = described.get("expiresAt")
        return cls(
            id=str(described["id"]),
            message=message,
            questions=tuple(questions),
            asker=str(described.get("asker") or ""),
            to=tuple(str(name) for name in described.get("to") or ()),
            expires_at=float(expires_at) if isinstance(expires_at, int | float) else None,
            on_timeout="default" if described.get("onTimeout") == "default" else "cancel",
            confirm=described.get("confirm") is True and len(questions) == 1,
        )

    def expiry(self, now: float) -> str:
        """How long the request has left, as the status line says it ("" when the gateway did not say)."""
        if self.expires_at is None:
            return ""
        what = "defaults sent" if self.on_timeout == "default" else "expires"
        seconds = round(self.expires_at - now)
        if seconds <= 60:
            return f"{what} in under a minute"
        if seconds < 90 * 60:
            return f"{what} in {round(seconds / 60)} min"
        return f"{what} at {time.strftime('%H:%M', time.localtime(self.expires_at))}"


@dataclass
class Draft:
    """The answers to one request so far, starting from the defaults, and the server's last issues."""

    form: RequestForm
    picked: list[set[int]] = field(init=False)
    texts: list[str] = field(init=False)
    issues: dict[int, str] = field(default_factory=dict)
    problem: str = ""
    """A refusal the server did not pin on one question."""

    def __post_init__(self) -> None:
        self.picked = [set(q.default_choices) for q in self.form.questions]
        self.texts = [q.default_text for q in self.form.questions]

    def pick(self, index: int, choice: int) -> None:
        """Choose ``choice``: the only one for single choice, toggled for multiple choice."""
        question = self.form.questions[index]
        if not 0 <= choice < len(question.choices):
            return
        if question.multiple:
            self.picked[index] ^= {choice}
        else:
            self.picked[index] = {choice}
        self._edited(index)

    def set_text(self, index: int, text: str) -> None:
        if text != self.texts[index]:
            self.texts[index] = text
            self._edited(index)

    def _edited(self, index: int) -> None:
        """A changed answer is judged again when it is sent; until then the old complaint goes."""
        self.issues.pop(index, None)
        self.problem = ""

    def answered(self, index: int) -> bool:
        if self.form.questions[index].free_text:
            return bool(self.texts[index].strip())
        return bool(self.picked[index])

    def answers(self) -> list[list[str]]:
        """The reply's ``answers``: option labels, Yes/No, typed text, or ``[]`` when unanswered."""
        replies: list[list[str]] = []
        for index, question in enumerate(self.form.questions):
            if question.free_text:
                text = self.texts[index]
                replies.append([text] if text.strip() else [])
            else:
                replies.append([question.choices[i].label for i in sorted(self.picked[index])])
        return replies

    def summary(self, index: int) -> str:
        """One question's answer in words, for the Confirm tab."""
        question = self.form.questions[index]
        if self.answered(index):
            if question.free_text:
                return self.texts[index]
            return ", ".join(question.choices[i].label for i in sorted(self.picked[index]))
        if question.has_default:
            return "(default)"
        return "(required, no answer yet)" if question.required else "(no answer)"

    def refused(self, message: str, issues: list[dict[str, Any]]) -> None:
        """Keep the server's reasons: each issue on its question, anything else as the problem."""
        self.issues = {}
        for issue in issues:
            index = issue.get("index")
            if isinstance(index, int) and 0 <= index < len(self.form.questions):
                self.issues[index] = str(issue.get("message") or "does not fit")
        self.problem = "" if self.issues else message


def _as_text(value: Any) -> str:
    """A default as a person would type it: ``2`` rather than ``2.0``."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, bool):
        return BOOLEAN_LABELS[0] if value else BOOLEAN_LABELS[1]
    return str(value)
