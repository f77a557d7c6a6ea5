"""Scheduling policies as plug-ins: the interface (`base.Policy`), one module per policy, and the
registry (`registry`) that engines, the simulator and the CLI look policies up in."""
