"""Continuable children: providers, the continuation manager, residency and who may reach a child.
"""
