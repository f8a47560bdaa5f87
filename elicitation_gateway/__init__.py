"""Elicitation Gateway: MCP elicitations asked as OpenCode questions over SSE."""

__version__ = "0.1.0"
