"""Where a member's model and workspace tool calls run: the Lead's process or a worker (shared store only)."""
