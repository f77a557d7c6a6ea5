"""A service that fails at startup, for the supervisor's teardown test."""
import sys

print("crashing_service: cannot start (on purpose)", flush=True)
sys.exit(3)
