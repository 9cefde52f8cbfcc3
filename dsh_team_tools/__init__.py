"""dsh_team_tools package."""
