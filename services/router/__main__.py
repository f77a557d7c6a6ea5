import sys

from services.router.main import run

sys.exit(run())
