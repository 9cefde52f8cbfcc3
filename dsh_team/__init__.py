"""dsh_team package."""
