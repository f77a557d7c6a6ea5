"""Calibration against a real engine: profile its steps, fit a cost preset, compare live with the simulator."""
