"""The durable mailbox: admission of a peer message, per-target delivery, and what a session already holds.
"""
