"""Workspace tools: agents read, edit, search and run code in one shared checkout."""
