"""Fuzzers of the mesh's inputs: forged and malformed NATS messages (`nats_fuzz.py`)."""
