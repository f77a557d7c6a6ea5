"""Offline discrete-event simulator: programs arrive, calls flow through a router to engines.

`Simulation` (simulator.py) runs one (policy, rate) point; `experiment.py` sweeps rates per policy
and finds each policy's highest stable rate within the latency SLO.
"""
