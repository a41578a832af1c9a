"""Placement of VMs on servers, for traces that carry no ``server_id`` (Azure V2 vmtable).

The rule, applied per cluster: events are replayed in time order (at the same second,
departures before arrivals, arrivals by creation time then row order); an arriving VM goes to
the lowest-numbered server whose free vCPUs and free memory both hold it (``first_fit``), or to
the open server its vCPUs leave the fewest free on, ties to the lowest number (``best_fit``: the
packing rule of production allocators such as Azure's Protean, which fill servers' cores so that
whole servers stay free for large VMs), a new server being opened when none does. A VM larger than a server gets a server of its own (its size), recorded
as oversized. Servers, not sockets, are the unit: DRAM is bought per server, and a socket holds
too few VMs for their peaks to be representative of a fleet's.

First fit is sequential by nature, so the replay is compiled (numba) rather than a per-VM Python
loop; a segment tree over sockets (max free vCPUs, max free GB per subtree) finds the
lowest-numbered fitting server in O(log servers) per arrival in practice.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

Rule = Literal["first_fit", "best_fit"]


@dataclass(frozen=True)
class ServerShape:
    vcpus: float = 96.0        # Pond §6.1 Intel host: 2 sockets of 24 cores x 2 threads
    memory_gb: float = 768.0   # ... with 384 GB of DDR4 per socket


def _kernel():
    """The compiled replay; built on first use so importing this module stays cheap."""
    import numba

    @numba.njit(cache=True)
    def first_fit(ev_vm, ev_arrival, cores, mem, cap_c, cap_m, best):  # pragma: no cover - compiled
        n = cores.shape[0]
        size = 1
        while size < max(n, 1):
            size *= 2
        tc = np.full(2 * size, cap_c)
        tm = np.full(2 * size, cap_m)
        unit = np.full(n, -1, np.int64)
        oversized = np.zeros(n, np.bool_)
        stack = np.empty(64, np.int64)
        n_open = 0
        for e in range(ev_vm.shape[0]):
            v = ev_vm[e]
            if ev_arrival[e]:
                c, m = cores[v], mem[v]
                found = -1
                if c <= cap_c and m <= cap_m and best:
                    left = 0.0          # best fit: the open server its vCPUs leave the fewest free on
                    for t in range(n_open):
                        if tc[t + size] >= c and tm[t + size] >= m and (found < 0 or tc[t + size] - c < left):
                            found, left = t, tc[t + size] - c
                    if found < 0:
                        found = n_open
                    leaf = found + size
                    tc[leaf] -= c
                    tm[leaf] -= m
                elif c <= cap_c and m <= cap_m:
                    stack[0] = 1
                    top = 1
                    while top > 0:
                        top -= 1
                        node = stack[top]
                        if tc[node] < c or tm[node] < m:
                            continue
                        if node >= size:
                            found = node - size
                            break
                        stack[top] = 2 * node + 1
                        stack[top + 1] = 2 * node
                        top += 2
                    leaf = found + size
                    tc[leaf] -= c
                    tm[leaf] -= m
                else:
                    found = n_open  # a server of its own, closed to others while the VM runs
                    oversized[v] = True
                    leaf = found + size
                    tc[leaf] = -1.0
                    tm[leaf] = -1.0
                unit[v] = found
                n_open = max(n_open, found + 1)
            else:
                leaf = unit[v] + size
                if oversized[v]:
                    tc[leaf] = cap_c
                    tm[leaf] = cap_m
                else:
                    tc[leaf] += cores[v]
                    tm[leaf] += mem[v]
            node = leaf // 2
            while node >= 1:
                tc[node] = max(tc[2 * node], tc[2 * node + 1])
                tm[node] = max(tm[2 * node], tm[2 * node + 1])
                node //= 2
        return unit, oversized

    return first_fit


_FIRST_FIT = None


def first_fit(start_s: np.ndarray, end_s: np.ndarray, vcpus: np.ndarray, memory_gb: np.ndarray,
              shape: ServerShape, rule: Rule = "first_fit") -> tuple[np.ndarray, np.ndarray]:
    """Server index (0, 1, ...) and oversized flag per VM of one cluster, placed by ``rule``."""
    global _FIRST_FIT
    if _FIRST_FIT is None:
        _FIRST_FIT = _kernel()
    n = len(start_s)
    end_s = np.maximum(end_s, start_s + 1)   # a VM occupies its server for at least one second
    t = np.concatenate([end_s, start_s]).astype(np.int64)
    arrival = np.concatenate([np.zeros(n, bool), np.ones(n, bool)])
    vm = np.concatenate([np.arange(n), np.arange(n)])
    order = np.lexsort((vm, arrival, t))   # by time, departures first, then row order
    return _FIRST_FIT(vm[order].astype(np.int64), arrival[order], np.asarray(vcpus, float),
                      np.asarray(memory_gb, float), float(shape.vcpus), float(shape.memory_gb), rule == "best_fit")


def assign_servers(vms: pd.DataFrame, start_s: np.ndarray, end_s: np.ndarray, shape: ServerShape,
                   cluster_col: str = "cluster_id", rule: Rule = "first_fit"
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(cluster code, server index within the cluster, oversized) per VM, by ``rule`` per cluster."""
    codes, _ = pd.factorize(vms[cluster_col], sort=True)
    unit = np.empty(len(vms), np.int64)
    oversized = np.empty(len(vms), bool)
    order = np.argsort(codes, kind="stable")
    bounds = np.flatnonzero(np.r_[True, np.diff(codes[order]) != 0, True])
    for lo, hi in itertools.pairwise(bounds):   # one compiled replay per cluster
        idx = order[lo:hi]
        unit[idx], oversized[idx] = first_fit(start_s[idx], end_s[idx], vms["vcpus"].to_numpy(float)[idx],
                                              vms["memory_gb"].to_numpy(float)[idx], shape, rule)
    return codes, unit, oversized
