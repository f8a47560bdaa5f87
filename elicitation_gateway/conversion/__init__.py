"""The pure heart of the gateway: plain functions over plain data, no I/O.

- :mod:`.schema`: a ``requestedSchema`` becomes a :class:`~.schema.Form` of questions;
  its parts: :mod:`.form_model` (the ``Form`` type, ``SchemaError``), :mod:`.schema_checks` (text and
  sizes, checked before anything is built), :mod:`.properties` (one property schema read into a
  field), :mod:`.options` (a property's choices), :mod:`.wording` (what the person sees);
- :mod:`.questions`: questions in OpenCode's shape (the ``/mcp`` tool's) become the same kind of form;
- :mod:`.fields`: what one question accepts, and the checks on its values;
- :mod:`.answers`: a person's answers become schema-typed ``content``;
- :mod:`.sensitive`: which form questions ask for secrets.
"""
