from tests.runtime.slow_workers import start

start("services.router.main")
