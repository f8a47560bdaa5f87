"""The pure heart of the gateway: plain functions over plain data, no I/O.

- :mod:`.schema`: a ``requestedSchema`` becomes a :class:`~.schema.Form` of questions;
- :mod:`.questions`: questions in OpenCode's shape (the ``/mcp`` tool's) become the same kind of form;
- :mod:`.fields`: what one question accepts, and the checks on its values;
- :mod:`.answers`: a person's answers become schema-typed ``content``;
- :mod:`.sensitive`: which form questions ask for secrets.
"""
