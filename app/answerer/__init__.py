"""The terminal answerer behind ``python -m app answer``.

- :mod:`app.answerer.draft`: a pending request's questions and the answers being put together (pure);
- :mod:`app.answerer.connection`: the gateway's HTTP routes and its event stream, with reconnects;
- :mod:`app.answerer.widgets`: one request on screen: a tab per question and a Confirm tab;
- :mod:`app.answerer.app`: the Textual app tying them together.
"""
