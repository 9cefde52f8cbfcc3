"""Durable sessions of the reference host: the JSONL log format, group commit, and the live session store.
"""
