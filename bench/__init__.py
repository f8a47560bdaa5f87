"""The benchmark: round trips, fan-out, capacity and event-loop lag, beside a raw Starlette baseline.

``python -m bench`` starts each server as its own process, loads it from client processes, and prints
a table (and writes JSON). See ``python -m bench --help``.
"""
