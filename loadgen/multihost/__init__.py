"""The multi-host test: hosts as network namespaces, a 3-node NATS cluster, faults across hosts."""
