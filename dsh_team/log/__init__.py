"""The Lead log as the Team's journal: serialized read-check-append, change waits, and service lifetime.
"""
