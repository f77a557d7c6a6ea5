"""Re-create the vendored files from vLLM's v0.32.0 release sdist (see ../README.md).

    python tests/vllm_upstream/tools/vendor.py /path/to/vllm-0.32.0   # the unpacked sdist

Every change to vLLM's text is one entry of EDITS below, so the diff to upstream stays readable.
The priority-ordering tests are adapted by hand after this script (README: "Adapted tests").
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
NOTE = ("# Vendored from vLLM v0.32.0 ({path}), Apache-2.0 (tests/vllm_upstream/LICENSE);\n"
        "# modified for Autellix as listed in tests/vllm_upstream/README.md.\n")
FILES = {"tests/v1/core/utils.py": "v1/core/utils.py",
         "tests/v1/core/test_scheduler.py": "v1/core/test_scheduler.py",
         "tests/v1/kv_connector/unit/utils.py": "v1/kv_connector/unit/utils.py"}
UNDER_TEST = "from tests.vllm_upstream.under_test import local_model, scheduler_under_test\n"
EDITS = {
    "v1/core/utils.py": [
        ("from tests.v1.kv_connector.unit.utils import", "from tests.vllm_upstream.v1.kv_connector.unit.utils import"),
        ("from vllm.v1.structured_output import StructuredOutputManager\n",
         "from vllm.v1.structured_output import StructuredOutputManager\n" + UNDER_TEST),
        ("    model_config = ModelConfig(\n        model=model,", "    model_config = ModelConfig(\n        model=local_model(model),"),
        ("        scheduler_cls = AsyncScheduler if async_scheduling else Scheduler",
         "        scheduler_cls = scheduler_under_test(async_scheduling)"),
    ],
    "v1/core/test_scheduler.py": [
        ("from tests.v1.core.test_prefix_caching import", "from tests.vllm_upstream.v1.core.prefix_caching_helpers import"),
        ("from tests.v1.kv_connector.unit.utils import", "from tests.vllm_upstream.v1.kv_connector.unit.utils import"),
        ("from .utils import EOS_TOKEN_ID", UNDER_TEST + "from .utils import EOS_TOKEN_ID"),
        ("model_config = ModelConfig(\n        model=model,", "model_config = ModelConfig(\n        model=local_model(model),"),
        ('model_config = ModelConfig(\n        model="facebook/opt-125m",',
         'model_config = ModelConfig(\n        model=local_model("facebook/opt-125m"),'),
        ("    scheduler = Scheduler(\n", "    scheduler = scheduler_under_test(False)(\n"),
        ("    return Scheduler(\n", "    return scheduler_under_test(False)(\n"),
    ],
    "v1/kv_connector/unit/utils.py": [],
}


def main(sdist: Path) -> None:
    shutil.copy(sdist / "LICENSE", HERE / "LICENSE")
    for src, dst in FILES.items():
        text = (sdist / src).read_text()
        for old, new in EDITS[dst]:
            if old not in text:
                raise SystemExit(f"{dst}: {old!r} not found: upstream changed, update EDITS")
            text = text.replace(old, new)
        lines = text.split("\n")
        lines.insert(2, NOTE.format(path=src).rstrip("\n"))  # after the SPDX lines
        (HERE / dst).write_text("\n".join(lines))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
