from tests.runtime.slow_workers import start

start("services.session_api.main")
