import sys

from services.session_api.main import run

sys.exit(run())
