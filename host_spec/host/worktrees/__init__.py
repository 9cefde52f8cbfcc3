"""Members' git worktrees and merges (the host's ``host_spec.worktrees.Worktrees``)."""
