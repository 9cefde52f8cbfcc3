"""dsh_team_invariant package."""
