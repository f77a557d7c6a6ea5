import sys

from services.engine_agent.main import run

sys.exit(run())
