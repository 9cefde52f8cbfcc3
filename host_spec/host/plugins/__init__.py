"""Plugin loading for the reference host: pluggy manager, ownership ledgers, hot reload and TOML profiles.
"""
