"""Pure scheduling core: no I/O, no clock, no logging, no asyncio.

Production (engine agents, the vLLM scheduler subclass, the process table) and the offline
simulator call exactly these functions, so a simulated result is evidence about production code.
"""
