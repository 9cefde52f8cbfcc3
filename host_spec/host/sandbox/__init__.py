"""The sandbox: every command a member starts runs inside bubblewrap under a named policy.

One concept per module: :mod:`.policy` (what a profile's ``[sandbox]`` table says
and the effective policy of one member), :mod:`.probe` (whether this machine can
make a sandbox at all, asked once per process), :mod:`.bwrap` (the bubblewrap
command line of one command), :mod:`.limits` (memory and process-count limits),
:mod:`.service` (the host's :class:`~.service.Sandbox`: the one object the bash
tool, the check runner, the file tools and MCP servers ask).
"""
