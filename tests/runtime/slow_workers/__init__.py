"""Real services started late (TEST_START_DELAY_S), hung forever (TEST_HANG=1) or dead
(TEST_EXIT=1), for the supervisor's test that `autellix up` waits for every instance. Each module
ends in its service's name, so the supervisor gives it that role's NATS credentials."""
import os
import sys
import time


def start(module: str) -> None:
    if os.environ.get("TEST_EXIT") == "1":
        print("slow worker: exiting before it serves (on purpose)", flush=True)
        sys.exit(4)
    if os.environ.get("TEST_HANG") == "1":
        print("slow worker: hanging before it serves (on purpose)", flush=True)
        while True:
            time.sleep(60)
    time.sleep(float(os.environ.get("TEST_START_DELAY_S", "0")))
    sys.exit(__import__(module, fromlist=["run"]).run())
