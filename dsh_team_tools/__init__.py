"""dsh_team_tools: the model-facing Agent Teams surface.

The nine Team tools (:mod:`.tools`, types in :mod:`.schemas`, names and
descriptions in :mod:`.catalog`), the teammate identity reminder
(:mod:`.reminder`), the ``team:policy`` prompt section (:mod:`.policy`) and the
``dsh-team-tools`` plugin that installs them into each Team member's own scope
(:mod:`.plugin`). Depends only on the ``host_spec`` contract and ``dsh_team``.
"""
