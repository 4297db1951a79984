"""Handlers the integration tests run in real worker processes, named ``tests.integration.handlers.<module>:<fn>``."""
