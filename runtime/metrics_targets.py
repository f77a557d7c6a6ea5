"""Where each process of `autellix up` serves Prometheus metrics, and the scrape-target file.

The session API serves /metrics on its own port (with several workers, each on its
API_WORKER_PORT); every other service gets a free port as
METRICS_PORT. The targets are written to `<state-dir>/metrics.json` in Prometheus' file-based
service discovery format (`file_sd_configs`), so a Prometheus beside the stack scrapes it as is.
"""

from __future__ import annotations

import json
from pathlib import Path

from runtime.catalog import HealthProbe, Instance, StackOptions
from runtime.ports import free_port

TARGETS_NAME = "metrics.json"


class MetricsPorts:
    def __init__(self, opts: StackOptions) -> None:
        self.host = opts.host
        self.api_port = opts.port
        self.by_instance: dict[str, str] = {}  # process name -> host:port of its /metrics

    def env_for(self, inst: Instance) -> dict[str, str]:
        """METRICS_PORT (and host) of one process; the API's are its own."""
        if inst.probe is HealthProbe.HTTP:  # one worker: the API port; several: each its own
            self.by_instance[inst.name] = f"{self.host}:{inst.env.get('API_WORKER_PORT', self.api_port)}"
            return {}
        port = free_port(self.host)
        self.by_instance[inst.name] = f"{self.host}:{port}"
        return {"METRICS_PORT": str(port), "METRICS_HOST": self.host}

    def write(self, state_dir: Path) -> Path:
        targets = [{"targets": [target], "labels": {"job": "autellix", "service": name.split("-", 1)[0],
                                                      "process": name}}
                   for name, target in self.by_instance.items()]
        path = Path(state_dir) / TARGETS_NAME
        path.write_text(json.dumps(targets, indent=2))
        return path

    def summary(self) -> str:
        return ", ".join(f"{name} {target}" for name, target in self.by_instance.items())
