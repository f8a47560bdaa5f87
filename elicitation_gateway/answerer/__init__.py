"""The terminal answerer behind ``elicitation-gateway answer``.

- :mod:`.draft`: a pending request's questions and the answers being put together (pure);
- :mod:`.connection`: the gateway's HTTP routes and its event stream, with reconnects;
- :mod:`.widgets`: one request on screen: a tab per question and a Confirm tab;
- :mod:`.app`: the Textual app tying them together.
"""
