"""Live agents of the reference host: inbox, turn loop, tool pipeline, prompt sections and scopes.
"""
