"""dsh_team_invariant: the ``dsh-team-invariant`` plugin.

Vetoes, inside ``session.append``, any Team event the Team fold would reject
(:mod:`.invariant`), so a Lead log can never hold a record that poisons replay.
Depends only on the ``host_spec`` contract and the pure ``dsh_team`` fold.
"""
