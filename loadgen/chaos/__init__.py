"""Chaos harness: a workload against `autellix up`-style processes while faults are injected
(engine SIGKILL, process_table SIGKILL, NATS restart, PostgreSQL restart), then an audit of the
process table against what the clients saw. Loopback only; bounded in fault count and time."""
