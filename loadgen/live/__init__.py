"""Live load generator: drives the HTTP API with agentic programs (Poisson arrivals, real
concurrency, tool pauses) and reports the same metrics as the offline simulator."""
