"""Workload generators: agentic programs (`ProgramSpec` DAGs) for the simulator and live driver."""

from loadgen.workloads.arrivals import poisson_arrivals, with_arrivals
from loadgen.workloads.registry import WORKLOADS, make_programs
from loadgen.workloads.validate import validate_program

__all__ = ["WORKLOADS", "make_programs", "poisson_arrivals", "validate_program", "with_arrivals"]
