"""Can vLLM 0.32's OffloadingConnector (CPU backend) run in a real CPU engine with our scheduler class?

One in-process engine on the tiny model (dummy weights), 24 KV blocks of 128 tokens, 8 prompts of
400 tokens generating 200 each (more than the KV holds: preemption is forced). Run from the
repository root: `.venv/bin/python docs/results/kv_tier/probe_offloading_connector.py`; its output
is in probe_offloading_connector.log.
"""

import os
import sys
import tempfile
import traceback
from pathlib import Path


def main() -> None:
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    os.environ["HF_HUB_OFFLINE"] = "1"
    sys.path.insert(0, ".")
    from vllm import LLM, SamplingParams

    from shared.core.policy import PolicyName, SchedulingPolicy
    from shared.core.starvation import StarvationConfig
    from shared.engine.program_sched import CONFIG_KEY, SchedulerSettings
    from shared.engine.tiny_model import make_tiny_model
    from shared.engine.vllm_adapter import scheduler_qualname

    model = make_tiny_model(Path(tempfile.gettempdir()) / "autellix-test-tiny-model")
    settings = SchedulerSettings(SchedulingPolicy(PolicyName.FCFS), StarvationConfig(beta=None)).to_config()
    try:
        llm = LLM(model=str(model), load_format="dummy", enforce_eager=True, max_model_len=2048,
                  num_gpu_blocks_override=24, max_num_seqs=8,
                  scheduler_cls=scheduler_qualname("autellix"), scheduling_policy="priority",
                  additional_config={CONFIG_KEY: settings},
                  kv_transfer_config={"kv_connector": "OffloadingConnector", "kv_role": "kv_both",
                                      "kv_connector_extra_config": {"cpu_bytes_to_use": 64 << 20}})
        outs = llm.generate([{"prompt_token_ids": [i % 500 + 3] * 400} for i in range(8)],
                            SamplingParams(max_tokens=200, ignore_eos=True))
        print("OK", [len(o.outputs[0].token_ids) for o in outs])
    except Exception:
        traceback.print_exc()
        print("FAILED")


if __name__ == "__main__":
    main()
