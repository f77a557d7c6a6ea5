"""Embedded runtime: real NATS and PostgreSQL servers from pip packages, and the supervisor behind
`autellix up`. I/O lives here by design; the pure core never imports it."""
