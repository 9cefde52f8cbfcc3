"""Suite-wide setup: this directory is on ``sys.path`` (pytest's prepend import mode).

That lets every test directory share the kits at this level (``kit_gates``)
without making ``tests`` a package.
"""
