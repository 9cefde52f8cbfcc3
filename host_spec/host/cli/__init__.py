"""The ``dsh`` command line: run, resume, log, and CLI extensions of plugins.
"""
