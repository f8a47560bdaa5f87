"""The notifier on its own, with Apprise plugins of the test's own (``tests/notify_plugins.py``, run in
the notifier's worker processes: ``gwrecord://`` keeps what it is sent, ``gwstuck://`` sleeps where only
a kill ends it, ``gwsocket://`` waits on a socket that never answers, ``gwonce://`` hangs once): targets
that cannot hold each other up, sends in worker processes and never in the loop's default executor,
workers killed at the deadline, reaped and replaced, questions already finished skipped, counts per
target and outcome, Apprise's lines logged in the gateway, and names of targets that keep their URLs'
secrets. Every test ends with every worker reaped, pass or fail."""

import asyncio
import concurrent.futures
import json
import logging
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tests.notify_plugins  # noqa: F401 (the test plugins, known to this process's Apprise too)
from elicitation_gateway import notify
from elicitation_gateway.conversion.schema import build_form
from elicitation_gateway.metrics import Metrics
from elicitation_gateway.models import QuestionRequest
from elicitation_gateway.notify import (
    Notifier,
    compose,
    load_plugin,
    target_label,
    worst_case_seconds,
)
from elicitation_gateway.records import Record
from elicitation_gateway.settings import Settings
from tests.helpers import child_processes, until


class Plugins:
    """What the test plugins did, read from the files they keep (they run in worker processes)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def _lines(self, name: str) -> list[str]:
        path = self.directory / name
        return path.read_text().splitlines() if path.exists() else []

    @property
    def recorded(self) -> list[tuple[str, str]]:
        return [(sent["title"], sent["body"]) for sent in self._sent()]

    def senders(self) -> set[int]:
        """The pids of the processes ``gwrecord://`` ran in."""
        return {sent["pid"] for sent in self._sent()}

    def _sent(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self._lines("recorded.jsonl")]

    def stuck(self) -> list[int]:
        """The pid of each call of ``gwstuck://``."""
        return [int(pid) for pid in self._lines("stuck.pids")]

    def fail(self, times: int) -> None:
        (self.directory / "failures").write_text(str(times))

    def open_gate(self) -> None:
        (self.directory / "open").touch()

    def listen(self, listener: socket.socket) -> None:
        (self.directory / "listener").write_text(str(listener.getsockname()[1]))


@pytest.fixture
def plugins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Plugins:
    monkeypatch.setenv("GATEWAY_TEST_PLUGINS", str(tmp_path))  # before any worker starts
    return Plugins(tmp_path)


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
    notifier = Notifier(
        Settings(**values), metrics, pending or still_pending, worker_imports=("tests.notify_plugins",)
    )
    return notifier, metrics


def count(metrics: Metrics, target: str, outcome: str) -> float:
    value = metrics.registry.get_sample_value(
        "gateway_notifications_total", {"target": target, "outcome": outcome}
    )
    assert value is not None, f"no series for {target} {outcome}"
    return value


def workers(notifier: Notifier) -> set[int]:
    """The pids of the notifier's worker processes (idle or sending)."""
    return {worker.pid for worker in notifier.pool.workers if worker.pid is not None}


def gone(pid: int) -> bool:
    """Whether ``pid`` has exited and been reaped (a zombie still has its /proc entry)."""
    return pid not in child_processes() and not Path(f"/proc/{pid}").exists()


@pytest.fixture
async def stopped() -> AsyncIterator[list[Notifier]]:
    """Notifiers the test started, stopped at its end whatever happens: then no worker is left, not
    even unreaped."""
    before = child_processes()
    started: list[Notifier] = []
    yield started
    for notifier in started:
        await notifier.stop()
    assert child_processes() <= before, "a worker process left behind"


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
    assert "each attempt in a worker process of its own" in page
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


def test_an_escalated_notification_says_nobody_answered_in_the_steps_time():
    title, body = compose(record("que_1"), "https://gw.test", escalated_after=600)
    plain_title, plain_body = compose(record("que_1"), "https://gw.test")
    assert title == "Escalated: " + plain_title.removeprefix("Question: ")
    assert body.splitlines()[0] == "Nobody answered in 10 min: it now reaches you too."
    assert body.splitlines()[1:] == plain_body.splitlines()


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


async def test_sends_run_in_one_warm_worker_process_never_on_the_loops_default_executor(plugins, stopped):
    default = RecordingExecutor()
    asyncio.get_running_loop().set_default_executor(default)
    notifier, metrics = make_notifier(["gwrecord://"])
    stopped.append(notifier)
    notifier.start()
    for number in range(3):
        notifier.submit(record(f"que_{number}"))
    await until(lambda: len(plugins.recorded) == 3, what="three notifications")
    # Counted once the worker has told the gateway (a moment after the plugin recorded it).
    await until(lambda: count(metrics, "1:gwrecord", "sent") == 3, what="three counted as sent")
    assert default.submitted == []
    [sender] = plugins.senders()  # started once, for the first, and kept warm for the others
    assert sender != os.getpid()
    assert sender in child_processes()
    assert workers(notifier) == {sender}


async def test_an_uninterruptible_target_has_its_worker_killed_at_each_deadline_and_delays_no_other(
    plugins, stopped, caplog
):
    """``gwstuck://`` sleeps where nothing in its process can end it: each attempt's worker is killed at
    ``notify_timeout`` and reaped, with a line that says why, while ``gwrecord://`` gets everything from a
    worker of its own and the loop's default executor stays free."""
    caplog.set_level(logging.INFO, logger="elicitation_gateway.notify")
    notifier, metrics = make_notifier(["gwstuck://", "gwrecord://"], notify_timeout=0.2)
    stopped.append(notifier)
    notifier.start()
    questions = 3
    for number in range(questions):
        notifier.submit(record(f"que_{number}"))
    await until(lambda: len(plugins.recorded) == questions, what="every notification to the good target")
    assert await asyncio.wait_for(asyncio.to_thread(lambda: "free"), 5) == "free"
    await until(lambda: count(metrics, "1:gwstuck", "failed") == questions, timeout=30, what="all failed")
    stuck = plugins.stuck()
    assert len(set(stuck)) == questions  # each attempt in a worker of its own: the last one was killed
    await until(lambda: all(gone(pid) for pid in stuck), what="every stuck worker killed and reaped")
    assert len(plugins.senders()) == 1  # the good target's worker was never touched
    assert count(metrics, "2:gwrecord", "sent") == questions
    assert sum("target 1:gwstuck" in line and "no answer within 0.2 s" in line for line in caplog.messages)


async def test_a_hanging_target_is_killed_at_its_deadline_and_its_process_reaped(plugins, stopped):
    notifier, metrics = make_notifier(["gwstuck://"], notify_timeout=1)
    stopped.append(notifier)
    notifier.start()
    notifier.submit(record("que_1"))
    await until(lambda: bool(plugins.stuck()), what="the attempt under way in its worker")
    began = time.monotonic()
    [pid] = plugins.stuck()
    assert pid in child_processes()
    await until(lambda: count(metrics, "1:gwstuck", "failed") == 1, what="the attempt failed")
    assert gone(pid)  # killed and reaped by the time the failure is counted
    # At its deadline: not before, and not long after (the worker had started before the plugin ran).
    assert 0.5 < time.monotonic() - began < 5
    # A replacement is started at once, with nothing to send yet, and kept warm.
    await until(lambda: bool(child_processes() - {pid}), what="a replacement worker")


async def test_an_attempt_past_its_deadline_never_announces_late(plugins, stopped):
    """``gwlate://`` would deliver 1.5 s after it starts: its worker is killed at the 0.5 s deadline, so
    the notification never arrives, not even after the plugin's time has passed."""
    notifier, metrics = make_notifier(["gwlate://"], notify_timeout=0.5)
    stopped.append(notifier)
    notifier.start()
    notifier.submit(record("que_1"))
    await until(lambda: count(metrics, "1:gwlate", "failed") == 1, what="the attempt failed")
    assert (plugins.directory / "late.pids").exists()  # it had started
    pids = [int(pid) for pid in (plugins.directory / "late.pids").read_text().split()]

    def ended(pid: int) -> bool:  # gone, or dead and not reaped yet: it records nothing any more
        try:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
        except FileNotFoundError:
            return True

    await until(lambda: all(ended(pid) for pid in pids), what="the late attempt's worker ended")
    assert plugins.recorded == []


async def test_the_next_delivery_after_a_kill_works_in_a_new_worker(plugins, stopped):
    """``gwonce://`` hangs on its first call only: that attempt's worker is killed, and the next
    notification to the same target is sent by its replacement."""
    notifier, metrics = make_notifier(["gwonce://"], notify_timeout=0.5)
    stopped.append(notifier)
    notifier.start()
    notifier.submit(record("que_1"))
    notifier.submit(record("que_2"))
    await until(lambda: count(metrics, "1:gwonce", "sent") == 1, timeout=20, what="the second sent")
    assert count(metrics, "1:gwonce", "failed") == 1
    killed = int((plugins.directory / "once.pid").read_text())
    assert gone(killed)
    assert [body.splitlines()[-1] for _, body in plugins.recorded] == [
        "Answer: https://gw.test/?question=que_2"
    ]
    assert plugins.senders() == workers(notifier)
    assert killed not in plugins.senders()


async def test_an_attempt_past_its_deadline_has_its_connection_ended_with_its_worker(plugins, stopped):
    """``gwsocket://`` reads, with no timeout, from a socket that never answers: only the kill of its
    worker at ``notify_timeout`` ends it, and the target sees the connection end."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        plugins.listen(listener)
        notifier, metrics = make_notifier(["gwsocket://"], notify_timeout=0.5, notify_retries=1)
        stopped.append(notifier)
        notifier.start()
        notifier.submit(record("que_1"))
        listener.settimeout(20)
        for _ in range(2):  # the first attempt and its retry
            connection, _ = await asyncio.to_thread(listener.accept)
            with connection:
                connection.settimeout(20)
                assert await asyncio.to_thread(connection.recv, 1) == b""  # ended by the kill
        await until(lambda: count(metrics, "1:gwsocket", "failed") == 1, what="both attempts killed")


async def test_stop_kills_what_is_being_sent_and_leaves_no_process_or_task(plugins):
    before = child_processes()
    with socket.create_server(("127.0.0.1", 0)) as listener:
        plugins.listen(listener)
        notifier, metrics = make_notifier(["gwsocket://"], notify_timeout=30)
        notifier.start()
        tasks_before = asyncio.all_tasks()
        notifier.submit(record("que_1"))
        notifier.submit(record("que_2"))
        listener.settimeout(20)
        connection, _ = await asyncio.to_thread(listener.accept)  # the first send under way
        connection.close()
        [sending] = workers(notifier)
        await notifier.stop()
        assert gone(sending)
        assert child_processes() <= before
        assert not [task for task in asyncio.all_tasks() - tasks_before if not task.done()]
        assert count(metrics, "1:gwsocket", "dropped") == 2


async def test_stop_tells_idle_workers_to_exit_and_reaps_them(plugins):
    before = child_processes()
    notifier, metrics = make_notifier(["gwrecord://", "gwrecord://?x=1"])
    notifier.start()
    notifier.submit(record("que_1"))
    await until(lambda: count(metrics, "2:gwrecord", "sent") == 1, what="sent to both")
    await until(lambda: count(metrics, "1:gwrecord", "sent") == 1, what="sent to both")
    idle = workers(notifier)
    assert len(idle) == 2  # a worker for each target
    await notifier.stop()
    assert all(gone(pid) for pid in idle)
    assert child_processes() <= before


async def test_apprise_lines_in_a_worker_are_logged_in_the_gateway_at_its_level(plugins, stopped, caplog):
    caplog.set_level(logging.INFO)
    notifier, metrics = make_notifier(["gwquiet://"])
    stopped.append(notifier)
    notifier.start()
    notifier.submit(record("que_1"))
    await until(lambda: count(metrics, "1:gwquiet", "failed") == 1, what="not delivered")
    lines = [(entry.name, entry.levelname, entry.getMessage()) for entry in caplog.records]
    assert ("apprise.custom", "WARNING", "gwquiet refused it: quota reached") in lines
    assert not [line for line in lines if "gwquiet debug detail" in line[2]]  # below the gateway's level
    assert any("not delivered (Apprise's log says why)" in line[2] for line in lines)


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
    plugins.fail(2)
    notifier, metrics = make_notifier(["gwrecord://"], notify_retries=1)
    stopped.append(notifier)
    notifier.start()
    notifier.submit(record("que_1"))  # raises twice: failed
    notifier.submit(record("que_2"))  # sent
    await until(lambda: count(metrics, "1:gwrecord", "sent") == 1, what="the second sent")
    assert count(metrics, "1:gwrecord", "failed") == 1
    assert len(plugins.recorded) == 1
    assert plugins.senders() == workers(notifier)  # the same worker: an exception kills nothing


async def test_a_full_queue_drops_and_counts(plugins, monkeypatch):
    monkeypatch.setattr(notify, "QUEUE_SIZE", 2)
    notifier, metrics = make_notifier(["gwgate://"], notify_timeout=30)
    notifier.start()
    for number in range(5):
        notifier.submit(record(f"que_{number}"))
    assert count(metrics, "1:gwgate", "dropped") == 3  # the worker task has taken none yet
    plugins.open_gate()
    await notifier.stop(flush=True)
    assert count(metrics, "1:gwgate", "sent") == 2


async def test_stop_with_flush_sends_what_is_queued_and_without_drops_it(plugins):
    flushing, flushed = make_notifier(["gwrecord://"], notify_timeout=30)
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


def test_the_latency_script_measures_a_worker():
    """``scripts/notify_latency.py``, whose numbers docs/performance.md shows, runs and reports each."""
    script = Path(__file__).resolve().parents[2] / "scripts" / "notify_latency.py"
    done = subprocess.run(
        [sys.executable, str(script), "--count", "3"], capture_output=True, text=True, timeout=60, check=True
    )
    measured = json.loads(done.stdout)
    assert measured["warm_deliveries"] == 3
    assert measured["first_delivery_s"] > 0
    assert measured["worker_mb"]["rss"] > 0
    assert measured["kill_and_reap_ms"] > 0
    assert measured["replacement_ready_s"] > 0
