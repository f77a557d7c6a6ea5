"""What the component benchmarks share: same-run ceilings, CPU per process, and the spread of repeats."""
