"""A stall probe: ``python -m tests.stall_probe URL`` asks ``URL/livez`` every 10 ms on one kept-alive
connection and prints each answer's latency in milliseconds, a line each, until its input closes.

A process of its own, so that nothing the test process does (building a big body, hypothesis) delays it:
what it measures is how long the gateway's event loop took to answer.
"""

import http.client
import sys
import threading
import time
from urllib.parse import urlsplit

INTERVAL = 0.01


def main(url: str) -> None:
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=60)
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    while not stop.is_set():
        started = time.perf_counter()
        connection.request("GET", "/livez")
        response = connection.getresponse()
        response.read()
        if response.status != 200:
            print(f"status {response.status}", flush=True)
        print(f"{(time.perf_counter() - started) * 1000:.1f}", flush=True)
        time.sleep(INTERVAL)


if __name__ == "__main__":
    main(sys.argv[1])
