"""``elicitation-gateway proxy``: any MCP server behind the gateway.

The proxy is an MCP server over stdio that forwards everything to an upstream MCP server (started over
stdio, or reached over Streamable HTTP) and asks the upstream's elicitations through the gateway, so a
person answers them even when the agent's client cannot show a form.

- :mod:`.command`: the command line.
- :mod:`.upstream`: connecting to the upstream, in the protocol era that lets its questions through.
- :mod:`.asking`: an upstream elicitation becomes one gateway question; the answer goes back.
- :mod:`.server`: the stdio server the client talks to, forwarding to the upstream.
"""
