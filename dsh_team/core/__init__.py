"""The pure Team core: durable records, the folded state, the one fold, the task DAG and board decisions.

Nothing here touches asyncio, a host or a file: every function is a value in, a value out,
so the service, the offline view and the invariant can share it and tests can drive it alone.
"""
