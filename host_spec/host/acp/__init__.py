"""``dsh acp``: the Lead of a Team as an Agent Client Protocol agent for editors (extra ``acp``).

Modules: :mod:`.server` (stdio until the editor leaves), :mod:`.agent` (the
protocol's methods), :mod:`.session` (one host per editor session, new or loaded,
through the paths ``dsh chat`` and ``dsh resume`` take), :mod:`.feed` (committed
events to ``session/update``, in order), :mod:`.updates` (the event mapping),
:mod:`.progress` (the board as the plan), :mod:`.turns` (which Lead turn answers a
prompt), :mod:`.servers` (the editor's MCP servers join the profile's),
:mod:`.permission` (the ``session/request_permission`` seam).

Every module imports the SDK (``acp``); only ``host_spec.host.acp.command`` is imported
at CLI start, and it imports this package inside the command.
"""
