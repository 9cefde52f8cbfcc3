"""Who is in the Team: membership of live agents, the roster rows, provisioning and crash reconciliation.
"""
