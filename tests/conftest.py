"""Shared fixtures: real NATS and PostgreSQL servers from the pip packages (no mocks)."""

pytest_plugins = ["tests.fixtures.nats", "tests.fixtures.postgres"]
