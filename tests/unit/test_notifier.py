"""The notifier on its own, with Apprise plugins of the test's own (``gwrecord://`` keeps what it is
sent, ``gwstuck://`` blocks where nothing can interrupt it, ``gwsocket://`` waits on a socket that never
answers): targets that cannot hold each other up, threads of their own and never the loop's default
executor, bounded threads per target, sockets cut off at the deadline, questions already finished
skipped, counts per target and outcome, and names of targets that keep their URLs' secrets."""

import asyncio
import concurrent.futures
import logging
import re
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from apprise.decorators import notify as apprise_plugin
from apprise.manager_plugins import NotificationManager
from hypothesis import given, settings
from hypothesis import strategies as st

from elicitation_gateway import notify
from elicitation_gateway.conversion.schema import build_form
from elicitation_gateway.metrics import Metrics
from elicitation_gateway.models import QuestionRequest
from elicitation_gateway.notify import (
    THREADS_PER_TARGET,
    Notifier,
    compose,
    load_plugin,
    target_label,
    worst_case_seconds,
)
from elicitation_gateway.records import Record
from elicitation_gateway.settings import Settings
from tests.helpers import until


class Plugins:
    """What the test plugins were sent, and the switch that lets ``gwstuck://`` go."""

    def __init__(self) -> None:
        self.recorded: list[tuple[str, str]] = []
        self.record_threads: set[str] = set()
        self.release = threading.Event()
        self.stuck_calls = 0
        self.failures_left = 0
        self.listener: socket.socket | None = None


@pytest.fixture
def plugins() -> Iterator[Plugins]:
    state = Plugins()

    @apprise_plugin(on="gwrecord")
    def record(body: str, title: str, *args: Any, **kwargs: Any) -> bool:
        state.record_threads.add(threading.current_thread().name)
        if state.failures_left:
            state.failures_left -= 1
            raise RuntimeError("a plugin's own bug")
        state.recorded.append((title, body))
        return True

    @apprise_plugin(on="gwstuck")
    def stuck(*args: Any, **kwargs: Any) -> bool:
        state.stuck_calls += 1
        state.release.wait()  # nothing but the test ends this wait: no socket to cut
        return True

    @apprise_plugin(on="gwsocket")
    def silent(*args: Any, **kwargs: Any) -> bool:
        assert state.listener is not None
        with socket.create_connection(state.listener.getsockname()) as connection:
            connection.settimeout(None)  # no timeout of its own: only a cut ends this read
            return connection.recv(1) != b""

    yield state
    state.release.set()
    NotificationManager().remove("gwrecord", "gwstuck", "gwsocket")


def record(request_id: str, message: str = "Deploy?") -> Record:
    """``message`` as a store may hold it: not checked (a store written before text was checked)."""
    form = build_form({"type": "object", "properties": {"ok": {"type": "boolean", "title": "Go"}}}, "m")
    request = QuestionRequest.new(request_id, "ses_test", list(form.questions), None)
    now = time.time()
    return Record.new(request, form, message, "/srv", now, now + 600, "cancel")


def make_notifier(urls: list[str], pending: Any = None, **settings_values: Any) -> tuple[Notifier, Metrics]:
    async def still_pending(request_id: str) -> bool:
        return True

    values: dict[str, Any] = {
        "notify": urls,
        "notify_timeout": 0.3,
        "notify_retries": 0,
        "public_url": "https://gw.test",
    }
    values.update(settings_values)
    metrics = Metrics()
    return Notifier(Settings(**values), metrics, pending or still_pending), metrics


def count(metrics: Metrics, target: str, outcome: str) -> float:
    value = metrics.registry.get_sample_value(
        "gateway_notifications_total", {"target": target, "outcome": outcome}
    )
    assert value is not None, f"no series for {target} {outcome}"
    return value


def notifier_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name.startswith("notify ")]


@pytest.fixture
async def stopped() -> AsyncIterator[list[Notifier]]:
    """Notifiers the test started, stopped at its end whatever happens."""
    started: list[Notifier] = []
    yield started
    for notifier in started:
        await notifier.stop()


# ---------------------------------------------------------------------------------------------------
# Pure parts


def test_the_worst_case_of_one_notification_at_one_target():
    assert worst_case_seconds(10, 3) == 10 + 0.5 + 10 + 1 + 10 + 2 + 10 == 43.5
    assert worst_case_seconds(2, 0) == 2
    assert worst_case_seconds(1, 1) == 2.5


def test_the_documented_limits_are_the_code_s():
    page = " ".join((Path(__file__).resolve().parents[2] / "docs" / "deploying.md").read_text().split())
    defaults = Settings()
    assert worst_case_seconds(defaults.notify_timeout, defaults.notify_retries) == 43.5
    assert "43.5 s with the defaults" in page
    assert f"a target has at most {THREADS_PER_TARGET} threads" in page
    assert f"own queue ({notify.QUEUE_SIZE:,} notifications" in page


def test_compose_writes_valid_utf8_whatever_the_store_holds():
    title, body = compose(record("que_1", message="x\ud800y"), "https://gw.test")
    assert "x\ufffdy" in body
    body.encode("utf-8")
    title.encode("utf-8")


def test_compose_makes_tool_text_safe_to_show_and_names_who_asks():
    """A notification may be read in a terminal (a mail client, a log): no control character but the
    newline, no bidi override or invisible character, who asks on a line of its own."""
    hostile = "Wipe?\x1b]0;pwned\x07\n\x1b[2KTrusted CI\u202e\u200b"
    asked = record("que_1", message=hostile).model_copy(update={"asker": "evil-mcp\x1b[8m · wipe"})
    title, body = compose(asked, "https://gw.test")
    for text in (title, body):
        assert not re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202e\u200b]", text), text
    assert body.splitlines()[:3] == [
        "Asked by evil-mcp[8m · wipe",
        "Wipe?]0;pwned",
        "[2KTrusted CI⟨U+202E⟩⟨U+200B⟩",
    ]
    assert "\n" not in title


@pytest.mark.parametrize(
    ("seconds", "said"),
    [
        *[(0.2, "1 s"), (1, "1 s"), (20, "20 s"), (20.4, "20 s"), (59.9, "60 s"), (90, "90 s")],
        *[(119.4, "119 s"), (119.6, "2 min"), (299.99, "5 min"), (300, "5 min"), (329, "5 min")],
        *[(331, "6 min"), (3600, "60 min")],
    ],
)
def test_the_time_left_is_said_to_the_nearest_unit(seconds, said):
    assert notify.time_left(seconds) == said


@pytest.mark.parametrize(("left", "said"), [(20, "in 20 s"), (300, "in 5 min")])
def test_a_reminder_says_how_long_the_question_has_left(left, said):
    # 0.3 s over: composing takes a moment, and the reminder is still said to the nearest second.
    reminded = record("que_1").model_copy(update={"expires_at": time.time() + left + 0.3})
    _, body = compose(reminded, "https://gw.test", reminder=True)
    assert body.splitlines()[0] == f"Still unanswered: it is cancelled {said}."


def test_apprise_timeouts_follow_the_notify_timeout_unless_the_url_sets_them():
    plugin = load_plugin("json://127.0.0.1:9/hook", 7.5)
    assert (plugin.socket_connect_timeout, plugin.socket_read_timeout) == (7.5, 7.5)
    plugin = load_plugin("json://127.0.0.1:9/hook?cto=2&rto=3", 7.5)
    assert (plugin.socket_connect_timeout, plugin.socket_read_timeout) == (2, 3)
    plugin = load_plugin("https://discord.com/api/webhooks/1234/abcd?rto=5", 7.5)  # Apprise's "native" form
    assert (plugin.socket_connect_timeout, plugin.socket_read_timeout) == (7.5, 5)


@pytest.mark.parametrize(
    "url", ["bogus://tok-5ecret/x", "tok-5ecret", "json://", "discord://tok-5ecret", "", "://tok-5ecret"]
)
def test_a_url_apprise_cannot_parse_is_refused_without_apprise_quoting_it(url, caplog):
    caplog.set_level(logging.DEBUG)
    assert load_plugin(url, 10) is None
    assert not [record for record in caplog.records if "5ecret" in record.getMessage()]


def test_the_urls_apprise_cannot_parse_are_named_by_position():
    urls = ["json://127.0.0.1:9/hook", "bogus://tok-5ecret/x", "ntfy://ntfy.sh/topic", "tok-5ecret"]
    assert notify.unusable_urls(urls, 10) == [2, 4]
    assert notify.unusable_urls(urls[:1], 10) == []


@pytest.mark.parametrize(
    ("url", "label"),
    [
        ("json://user:pw-5ecret@example.com/hook-5ecret?token=5ecret", "3:json"),
        ("jsons://example.com/hook", "3:jsons"),
        ("JSON://example.com/hook", "3:json"),
        ("https://discord.com/api/webhooks/1234/tok-5ecret", "3:discord"),
        ("discord://1234/tok-5ecret", "3:discord"),
        ("ntfy://ntfy.sh/topic-5ecret", "3:ntfy"),
    ],
)
def test_a_target_is_named_by_position_and_the_plugins_scheme(url, label):
    assert target_label(3, load_plugin(url, 10), url) == label


SECRET = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_", min_size=6, max_size=30)


@settings(max_examples=60, deadline=None)
@given(user=SECRET, password=SECRET, path=SECRET, query=SECRET, position=st.integers(1, 99))
def test_a_target_label_never_holds_anything_of_the_url_but_its_scheme(user, password, path, query, position):
    url = f"json://{user}:{password}@example.com/{path}?x={query}"
    label = target_label(position, load_plugin(url, 10), url)
    assert re.fullmatch(r"\d+:[a-z0-9+.-]+", label)
    assert label == f"{position}:json"


# ---------------------------------------------------------------------------------------------------
# Targets on their own


class RecordingExecutor(concurrent.futures.ThreadPoolExecutor):
    """The loop's default executor, noting what runs on it."""

    def __init__(self) -> None:
        super().__init__(max_workers=2)
        self.submitted: list[Any] = []

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        self.submitted.append(fn)
        return super().submit(fn, *args, **kwargs)


async def test_sends_run_on_threads_of_their_own_never_on_the_loops_default_executor(plugins, stopped):
    default = RecordingExecutor()
    asyncio.get_running_loop().set_default_executor(default)
    notifier, metrics = make_notifier(["gwrecord://"])
    stopped.append(notifier)
    notifier.start()
    for number in range(3):
        notifier.submit(record(f"que_{number}"))
    await until(lambda: len(plugins.recorded) == 3, what="three notifications")
    # Counted once the send's thread has told the loop (a moment after the plugin recorded it).
    await until(lambda: count(metrics, "1:gwrecord", "sent") == 3, what="three counted as sent")
    assert default.submitted == []
    assert plugins.record_threads == {"notify 1:gwrecord"}


async def test_an_uninterruptible_target_holds_only_its_own_few_threads_and_delays_no_other(
    plugins, stopped, caplog
):
    """``gwstuck://`` blocks where no cut reaches: it keeps at most THREADS_PER_TARGET threads, then
    fails at once with a line that says why, while ``gwrecord://`` gets everything and the loop's
    default executor stays free. Once it lets go, its threads end."""
    caplog.set_level(logging.INFO, logger="elicitation_gateway.notify")
    notifier, metrics = make_notifier(["gwstuck://", "gwrecord://"], notify_timeout=0.2)
    stopped.append(notifier)
    notifier.start()
    questions = 3 * THREADS_PER_TARGET
    for number in range(questions):
        notifier.submit(record(f"que_{number}"))
    await until(lambda: len(plugins.recorded) == questions, what="every notification to the good target")
    assert await asyncio.wait_for(asyncio.to_thread(lambda: "free"), 5) == "free"
    await until(lambda: count(metrics, "1:gwstuck", "failed") == questions, timeout=10, what="all failed")
    assert plugins.stuck_calls == THREADS_PER_TARGET
    assert len(notifier_threads()) == THREADS_PER_TARGET
    held = metrics.registry.get_sample_value("gateway_notification_threads", {"target": "1:gwstuck"})
    assert held == THREADS_PER_TARGET
    assert any(
        "target 1:gwstuck" in line and f"all {THREADS_PER_TARGET} of its threads are still held" in line
        for line in caplog.messages
    )
    assert count(metrics, "2:gwrecord", "sent") == questions
    plugins.release.set()
    await until(lambda: not notifier_threads(), what="the stuck threads end once let go")


async def test_an_attempt_past_its_deadline_has_its_sockets_shut(plugins, stopped):
    """``gwsocket://`` reads, with no timeout, from a socket that never answers: only the notifier's cut
    at ``notify_timeout`` ends it, and its thread with it."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        plugins.listener = listener
        notifier, metrics = make_notifier(["gwsocket://"], notify_timeout=0.2, notify_retries=1)
        stopped.append(notifier)
        notifier.start()
        notifier.submit(record("que_1"))
        await until(lambda: count(metrics, "1:gwsocket", "failed") == 1, what="both attempts cut off")
        await until(lambda: not notifier_threads(), what="the cut threads end")


async def test_stop_cuts_off_what_is_being_sent_and_leaves_no_thread_or_task(plugins):
    with socket.create_server(("127.0.0.1", 0)) as listener:
        plugins.listener = listener
        notifier, metrics = make_notifier(["gwsocket://"], notify_timeout=30)
        notifier.start()
        tasks_before = asyncio.all_tasks()
        notifier.submit(record("que_1"))
        notifier.submit(record("que_2"))
        await until(lambda: len(notifier_threads()) == 1, what="the first send under way")
        await notifier.stop()
        assert not notifier_threads()
        assert not [task for task in asyncio.all_tasks() - tasks_before if not task.done()]
        assert count(metrics, "1:gwsocket", "dropped") == 2


async def test_a_finished_question_is_skipped_and_one_the_store_cannot_look_up_is_sent(plugins, stopped):
    async def still_pending(request_id: str) -> bool:
        if request_id == "que_unreachable":
            raise ConnectionError("the store is down")
        return request_id != "que_answered"

    notifier, metrics = make_notifier(["gwrecord://"], still_pending)
    stopped.append(notifier)
    notifier.start()
    for request_id in ("que_answered", "que_unreachable", "que_pending"):
        notifier.submit(record(request_id))
    await until(lambda: count(metrics, "1:gwrecord", "sent") == 2, what="two sent")
    assert count(metrics, "1:gwrecord", "skipped") == 1
    assert ["que_unreachable" in body for _, body in plugins.recorded] == [True, False]


async def test_a_plugin_that_raises_is_a_failed_attempt_retried_and_the_worker_goes_on(plugins, stopped):
    plugins.failures_left = 2
    notifier, metrics = make_notifier(["gwrecord://"], notify_retries=1)
    stopped.append(notifier)
    notifier.start()
    notifier.submit(record("que_1"))  # raises twice: failed
    notifier.submit(record("que_2"))  # sent
    await until(lambda: count(metrics, "1:gwrecord", "sent") == 1, what="the second sent")
    assert count(metrics, "1:gwrecord", "failed") == 1
    assert len(plugins.recorded) == 1


async def test_a_full_queue_drops_and_counts(plugins, monkeypatch):
    monkeypatch.setattr(notify, "QUEUE_SIZE", 2)
    notifier, metrics = make_notifier(["gwstuck://"], notify_timeout=30)
    notifier.start()
    for number in range(5):
        notifier.submit(record(f"que_{number}"))
    assert count(metrics, "1:gwstuck", "dropped") == 3  # the worker has taken none yet
    plugins.release.set()
    await notifier.stop(flush=True)
    assert count(metrics, "1:gwstuck", "sent") == 2


async def test_stop_with_flush_sends_what_is_queued_and_without_drops_it(plugins):
    flushing, flushed = make_notifier(["gwrecord://"])
    flushing.start()
    dropping, dropped = make_notifier(["gwrecord://"])
    dropping.start()
    for number in range(3):
        flushing.submit(record(f"que_{number}"))
        dropping.submit(record(f"que_{number}"))
    await dropping.stop()
    await flushing.stop(flush=True)
    assert count(flushed, "1:gwrecord", "sent") == 3
    assert count(dropped, "1:gwrecord", "dropped") == 3
    assert count(dropped, "1:gwrecord", "sent") == 0
