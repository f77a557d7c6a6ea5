"""Gittins: the program's Gittins rank, learned online per workload from finished programs.
SERPT's shell with a different statistic of the same window (shared/core/size_estimator.py): the
expected service per unit of probability of finishing within the best next quantum, which ranks a
program about to reach a size many of its type stop at ahead of one the mean excess would favour.
Admission order only; too few finished programs of its type: least attained service."""

from __future__ import annotations

from shared.core.policies.serpt import Serpt


class Gittins(Serpt):
    name = "gittins"
    description = ("Gittins: the program's Gittins rank from its type's finished programs "
                   "(admission order only, no oracle)")
    size_rank = "gittins"
