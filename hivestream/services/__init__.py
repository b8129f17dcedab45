"""What a user or an agent does with hivestream's memory, one module per domain, called by the CLI,
the agent API's HTTP routes (:mod:`hivestream.api`) and the MCP adapter: :mod:`.experiences` (the
knowledge base: search, submit, content, review, extraction requests), :mod:`.recall` (frames
recall), :mod:`.readers` (where reads come from), :mod:`.files` (replacing a projection file), and the
memory stubs: :mod:`.stubs` (a prompt matched live), :mod:`.stub_door` (at the hook routes),
:mod:`.stub_lifecycle` (archive, refresh), :mod:`.stub_events` (where a command's stub events go),
:mod:`.stub_nightly` (the nightly refresh's schedule).
"""
