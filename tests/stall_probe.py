"""A stall probe: ``python -m tests.stall_probe URL PID`` asks ``URL/livez`` every 10 ms on one kept-alive
connection and prints each answer's latency in milliseconds, a line each, until its input closes.

A process of its own, so that nothing the test process does (building a big body, hypothesis) delays it:
what it measures is how long the gateway's event loop took to answer. Not how long the machine made
it wait: the time the gateway's threads and the probe itself spent runnable but waiting for a CPU
(Linux's schedstat) is left out, so that a machine busy with other work does not pass for a stalled
loop, while a loop busy computing still counts in full. Every thread of the gateway counts, not only
the loop's: a worker thread (a big schema converted off the loop) that the machine stops while it holds
the GIL stops the loop too, which then waits for the GIL, not for a CPU.
"""

import http.client
import os
import sys
import threading
import time
from urllib.parse import urlsplit

INTERVAL = 0.01


def waited(pid: int | str) -> float:
    """Milliseconds the process's threads have spent waiting on a run queue, in all (0 where the kernel
    does not say)."""
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0.0
    total = 0.0
    for thread in threads:
        try:
            with open(f"/proc/{pid}/task/{thread}/schedstat") as schedstat:
                total += int(schedstat.read().split()[1]) / 1e6
        except (OSError, IndexError, ValueError):
            continue  # a thread that ended meanwhile
    return total


def main(url: str, pid: str) -> None:
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=60)
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    while not stop.is_set():
        queued = waited(pid) + waited("self")
        started = time.perf_counter()
        connection.request("GET", "/livez")
        response = connection.getresponse()
        response.read()
        elapsed = (time.perf_counter() - started) * 1000
        queued = waited(pid) + waited("self") - queued
        if response.status != 200:
            print(f"status {response.status}", flush=True)
        print(f"{max(elapsed - queued, 0):.1f}", flush=True)
        time.sleep(INTERVAL)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
