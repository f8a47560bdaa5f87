"""One pending request on screen, as OpenCode's question prompt shows it: a tab per question, labelled
by its header, and a Confirm tab. A plain confirmation (one Yes/No question) has no Confirm tab: picking
Yes or No sends it.

The widgets draw a :class:`~.draft.Draft` and change it; sending, dismissing and declining
are the app's, asked for with messages.
"""

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.message import Message
from textual.widget import Widget
from textual.widgets import ContentSwitcher, Input, OptionList, Static, Tab, Tabs
from textual.widgets.option_list import Option

from elicitation_gateway.answerer.draft import Draft, Question
from elicitation_gateway.display import safe

CONFIRM = "confirm"


class Advance(Message):
    """An answer is chosen: move on to the next tab."""


class Edited(Message):
    """The draft changed: tab marks and the Confirm summary follow."""


class SendRequested(Message):
    """Confirm: send the answers."""


class DeclineRequested(Message):
    """Say no to the whole request."""


class ChoiceList(OptionList):
    """The options of a question; 1–9 pick one directly, Enter picks the highlighted one."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(str(number), f"pick({number - 1})", show=False) for number in range(1, 10)
    ]

    def action_pick(self, index: int) -> None:
        if index < self.option_count:
            self.highlighted = index
            self.action_select()


class QuestionPane(Vertical):
    """One question: its text, what it needs, and the options or a text field."""

    def __init__(self, index: int, draft: Draft, *, id: str) -> None:
        super().__init__(id=id, classes="question-pane")
        self.index = index
        self.draft = draft
        self.question: Question = draft.form.questions[index]

    def compose(self) -> ComposeResult:
        question = self.question
        yield Static(Content(safe(question.text)), classes="question-text")
        if question.warning:
            yield Static(Content.assemble(("⚠ ", "bold"), safe(question.warning)), classes="question-warning")
        yield Static(self._needs(), classes="question-needs")
        if question.free_text:
            yield Input(
                value=self.draft.texts[self.index],
                placeholder=self._placeholder(),
                select_on_focus=False,
                id=f"answer-{self.index}",
            )
        else:
            picked = self.draft.picked[self.index]
            cursor = min(picked) if picked else 0
            choices = ChoiceList(*self._options(cursor), id=f"answer-{self.index}")
            choices.highlighted = cursor
            yield choices
        yield Static("", classes="issue")

    def on_mount(self) -> None:
        self.show_issue()

    def answer_widget(self) -> Widget:
        return self.query_one(f"#answer-{self.index}")

    def show_issue(self) -> None:
        issue = self.draft.issues.get(self.index, "")
        shown = self.query_one(".issue", Static)
        shown.update(Content.assemble(("✗ ", "bold"), safe(issue)) if issue else "")
        shown.display = bool(issue)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.draft.pick(self.index, event.option_index)
        self._redraw_options()
        self.show_issue()
        self.post_message(Edited())
        if not self.question.multiple:
            self.post_message(Advance())

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        event.stop()
        self._redraw_options()

    def _redraw_options(self) -> None:
        choices = self.query_one(ChoiceList)
        for number, option in enumerate(self._options(choices.highlighted)):
            choices.replace_option_prompt_at_index(number, option.prompt)

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        had_issue = self.index in self.draft.issues
        self.draft.set_text(self.index, event.value)
        if had_issue:
            self.show_issue()
        self.post_message(Edited())

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.post_message(Advance())

    def _options(self, cursor: int | None = None) -> list[Option]:
        """The options' lines; ``›`` marks the cursor, so that it shows without colours too."""
        question = self.question
        picked = self.draft.picked[self.index]
        options = []
        for number, choice in enumerate(question.choices):
            chosen = number in picked
            marks = ("[✓] ", "[ ] ") if question.multiple else ("● ", "○ ")
            mark = marks[0] if chosen else marks[1]
            parts: list[str | tuple[str, str]] = [
                ("› " if number == cursor else "  ", "bold"),
                f"{number + 1}. " if number < 9 else "   ",
                (mark, "bold" if chosen else ""),
                (safe(choice.label, oneline=True), "bold" if chosen else ""),
            ]
            if number in question.default_choices:
                parts.append((" (default)", "dim"))
            if choice.description:
                parts.append((f"\n        {safe(choice.description, oneline=True)}", "dim"))
            options.append(Option(Content.assemble(*parts)))
        return options

    def _needs(self) -> Content:
        question = self.question
        if self.draft.form.confirm:
            return Content.assemble(("Yes accepts, No declines: Enter or 1–2 sends", "dim"))
        words = [("required", "bold") if question.required else ("optional", "dim")]
        if question.multiple:
            words.append(("choose any: Enter or 1–9 toggles, Tab moves on", "dim"))
        elif not question.free_text:
            words.append(("choose one: Enter or 1–9", "dim"))
        else:
            words.append(("type the answer, Enter moves on", "dim"))
        words.extend((safe(hint, oneline=True), "dim") for hint in question.hints)
        return Content(" · ").join(Content.assemble(word) for word in words)

    def _placeholder(self) -> str:
        kind = self.question.kind
        return {"integer": "a whole number", "number": "a number"}.get(kind, "type your answer")


class ConfirmPane(Widget, can_focus=True):
    """A review of every answer; Enter sends them, d declines."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "send", "Send", show=False),
        Binding("d", "decline", "Decline", show=False),
    ]

    def __init__(self, draft: Draft, *, id: str) -> None:
        super().__init__(id=id)
        self.draft = draft

    def render(self) -> Content:
        draft = self.draft
        lines: list[Content] = [Content.assemble(("Review your answers", "bold"), "\n")]
        for index, question in enumerate(draft.form.questions):
            answer = draft.summary(index)
            style = "" if draft.answered(index) else "dim"
            if question.required and not draft.answered(index) and not question.has_default:
                style = "bold"
            header = safe(question.header, oneline=True)
            lines.append(Content.assemble((f"{header}: ", "bold"), (safe(answer), style)))
            if index in draft.issues:
                lines.append(Content.assemble(("  ✗ ", "bold"), safe(draft.issues[index])))
        if draft.problem:
            lines.append(Content.assemble("\n", ("✗ ", "bold"), safe(draft.problem)))
        lines.append(Content.assemble("\n", ("Enter", "bold"), " send · ", ("d", "bold"), " decline"))
        return Content("\n").join(lines)

    def action_send(self) -> None:
        self.post_message(SendRequested())

    def action_decline(self) -> None:
        self.post_message(DeclineRequested())


class RequestView(Vertical):
    """A pending request: the tool's message, the tabs and the pane of the active tab."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("tab,right", "move(1)", "Next", show=False),
        Binding("shift+tab,left", "move(-1)", "Previous", show=False),
    ]

    def __init__(self, draft: Draft) -> None:
        super().__init__(id="request")
        self.draft = draft
        self.tab_ids = [f"tab-{i}" for i in range(len(draft.form.questions))]
        if not draft.form.confirm:  # a plain confirmation is sent once Yes or No is picked
            self.tab_ids.append(f"tab-{CONFIRM}")

    def compose(self) -> ComposeResult:
        form = self.draft.form
        if form.asker:  # its own line and style: no line of the message can pass for it
            who = Content.assemble(" asked by ", (safe(form.asker, oneline=True), "bold"), " ")
            yield Static(who, id="asker")
        if form.to:
            yield Static(Content(" for " + safe(", ".join(form.to), oneline=True) + " "), id="to")
        if form.message.strip():
            yield Static(Content(safe(form.message.strip())), id="message")
        tabs = Tabs(*[Tab(self._label(i), id=tab_id) for i, tab_id in enumerate(self.tab_ids)])
        tabs.can_focus = False
        yield tabs
        with ContentSwitcher(initial="pane-0", id="panes"):
            for index in range(len(form.questions)):
                yield QuestionPane(index, self.draft, id=f"pane-{index}")
            if not form.confirm:
                yield ConfirmPane(self.draft, id=f"pane-{CONFIRM}")

    def on_mount(self) -> None:
        self.call_after_refresh(self._focus_active)

    @property
    def active_index(self) -> int:
        active = self.query_one(Tabs).active
        return self.tab_ids.index(active) if active in self.tab_ids else 0

    def go_to(self, index: int) -> None:
        self.query_one(Tabs).active = self.tab_ids[max(0, min(index, len(self.tab_ids) - 1))]

    def action_move(self, step: int) -> None:
        self.go_to((self.active_index + step) % len(self.tab_ids))

    def on_tabs_tab_activated(self, event: Tabs.TabActivated) -> None:
        event.stop()
        pane = event.tab.id.replace("tab-", "pane-", 1) if event.tab.id else "pane-0"
        self.query_one(ContentSwitcher).current = pane
        self._refresh_review()
        self.call_after_refresh(self._focus_active)

    def _refresh_review(self) -> None:
        for review in self.query(ConfirmPane):
            review.refresh()

    def on_advance(self, event: Advance) -> None:
        event.stop()
        if self.draft.form.confirm:  # Yes or No picked: that is the whole answer
            self.post_message(SendRequested())
            return
        self.action_move(1)

    def on_edited(self, event: Edited) -> None:
        event.stop()
        self.refresh_marks()

    def refresh_marks(self) -> None:
        """Tab labels show required questions, answers given and the server's complaints."""
        tabs = self.query_one(Tabs)
        for index, tab_id in enumerate(self.tab_ids):
            tab = tabs.get_tab(tab_id)
            label = self._label(index)
            if tab is not None and tab.label != label:  # a relabelled tab slides the underline again
                tab.label = label
        self._refresh_review()

    def show_refusal(self) -> None:
        """After a refused reply: every issue on its tab, and the first of them in front."""
        for pane in self.query(QuestionPane):
            pane.show_issue()
        self.refresh_marks()
        if self.draft.issues:
            self.go_to(min(self.draft.issues))
        else:
            self.go_to(len(self.tab_ids) - 1)

    def _focus_active(self) -> None:
        current = self.query_one(ContentSwitcher).current
        if current == f"pane-{CONFIRM}":
            self.query_one(ConfirmPane).focus()
        elif current is not None:
            self.query_one(f"#{current}", QuestionPane).answer_widget().focus()

    def _label(self, index: int) -> Content:
        questions = self.draft.form.questions
        if index == len(questions):
            return Content("Confirm")
        question = questions[index]
        parts: list[str | tuple[str, str]] = [safe(question.header, oneline=True)]
        if question.required:
            parts.append(("*", "bold"))
        if index in self.draft.issues:
            parts.append((" ✗", "bold"))
        elif self.draft.answered(index):
            parts.append((" ✓", ""))
        return Content.assemble(*parts)
