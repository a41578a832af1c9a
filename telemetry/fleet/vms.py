"""The built-in VM fleet: customers, their deployments, VMs, untouched memory and counters.

Mechanisms rather than marginals:

- A customer owns *deployments* (one VM type in one region/cluster running one lab workload,
  active for a span of days). VMs arrive at a deployment as a Poisson process, so VMs of a
  (customer, VM type, region) resemble each other and new deployments start without history.
- Customers have a latent untouched-memory level that drifts linearly over time; a VM's
  untouched fraction is that level moved by its size, guest OS, cluster, lifetime and its
  workload's footprint, plus the customer's own consistency.
- Customer size is heavy-tailed (log-normal); new customers keep arriving.
- ``vm_counters`` are the VM's workload's counter rates over the VM's first hour, with per-VM
  noise: the lab and the fleet share one behaviour model. Deployments run workloads of the whole
  population (lab.py), so most VMs run a workload the lab never measured.
- A VM still running at the end of the trace has no ``untouched_fraction``; its
  ``untouched_so_far`` is what it has not touched yet (memory is touched early in a VM's life).
- ``generate.fleet.internal_share`` of the customers are internal: each of their VMs reports its
  slowdown entirely on pool memory (``vm_slowdowns``, an A/B test an hour after it starts).
- ``generate.fleet.burn_in_days``: the fleet runs that many days before the trace opens, and the trace keeps the VMs
  still alive on its first day (created before it), as a real trace that starts on a running fleet does. Without it
  the trace opens empty, and its alive memory climbs for weeks (the longest lives are 60 days).
- ``generate.variant`` ``walks`` also weakens customer persistence: each VM strays further from
  its customer's level, and levels drift faster.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pandas as pd

from pond.core.params import FleetParams, LabParams
from pond.telemetry.fleet.lab import Lab, measured, pool_slowdown
from pond.telemetry.fleet.portable import INV_LN2, exp, log, power

FAMILIES = {"D": 4.0, "E": 8.0, "F": 2.0, "L": 8.0, "M": 16.0, "B": 4.0}
FAMILY_WEIGHTS = np.array([0.40, 0.22, 0.14, 0.05, 0.04, 0.15])
VCPUS = np.array([2, 4, 8, 16, 32, 48, 64])
VCPU_WEIGHTS = np.array([0.28, 0.27, 0.2, 0.13, 0.07, 0.03, 0.02])
# generate.fleet.shape azure: the public 2019 trace (docs/calibration.md, "Fleet shape"). vCPUs: its mix, its 1.2% above
# 24 split over 32/48/64; GB per vCPU drawn independently of the vCPUs, weights solved so that the memory mix
# (2 / 4 / 8 GB: 12.1 / 16.5 / 32.8%) about holds; the families' names say their ratio (A 1, F 2, D 4, E 8 GB/vCPU).
AZURE_VCPUS = np.array([2, 4, 8, 12, 24, 32, 48, 64])
AZURE_VCPU_WEIGHTS = np.array([0.582, 0.229, 0.120, 0.001, 0.056, 0.006, 0.004, 0.002])
AZURE_GB_PER_VCPU = {"A": 1.0, "F": 2.0, "D": 4.0, "E": 8.0}
AZURE_GB_WEIGHTS = np.array([0.208, 0.160, 0.460, 0.172])
# Lifetime CDF (hours, share ended by then), log-linear between the points; a VM of a deployment lives like its
# deployment's others (Gaussian copula, correlation AZURE_LIFE_RHO), and the marginal is the trace's.
AZURE_LIFE_CDF = ((5 / 60, 0.0), (0.5, 0.518), (1.0, 0.636), (10.0, 0.833), (24.0, 0.891), (100.0, 0.918),
                  (1440.0, 1.0))
AZURE_LIFE_RHO = 0.8
# A VM that rents more memory than the fleet's typical VM leaves more of it untouched: the size a VM is compared with
TYPICAL_GB = {"footprint": 32.0, "azure": 8.0}
# Per variant: range of a customer's per-VM logit spread, and a multiplier of its drift.
PERSISTENCE = {"pond": ((0.6, 1.6), 1.0), "walks": ((1.2, 2.4), 2.0)}


def _ids(prefix: str, n: int, width: int) -> pd.Series:
    """``prefix`` + zero-padded running number, vectorized (fleets have millions of rows)."""
    return prefix + pd.Series(np.arange(n)).astype(str).str.zfill(width)


REGIONS = ("eastus", "westeurope", "southeastasia", "westus2", "northeurope", "japaneast")


def _customers(p: FleetParams, rng: np.random.Generator, variant: str = "pond") -> pd.DataFrame:
    spread, drift = PERSISTENCE[variant]
    n_new = rng.poisson(p.new_customers_per_day * p.n_days)
    n = p.n_customers + n_new
    start = np.concatenate([np.zeros(p.n_customers), rng.uniform(0, p.n_days, n_new)])
    regions = np.array(REGIONS[: p.n_regions])
    return pd.DataFrame({
        "customer_id": _ids("cust-", n, 6),
        "start_day": start,
        "weight": rng.lognormal(0.0, 1.5, n),
        "home_region": rng.choice(regions, n),
        "windows_pref": rng.random(n) < p.windows_share,
        "level": rng.normal(0.7, p.untouched_logit_sd, n),
        "drift": rng.normal(0.0, p.drift_per_day * drift, n),
        "consistency": rng.uniform(*spread, n),  # per-VM logit sd around the customer level
        "family_bias": rng.integers(0, len(FAMILIES), n),
    })


def _deployments(cust: pd.DataFrame, lab: Lab, p: FleetParams, rng: np.random.Generator) -> pd.DataFrame:
    k = 1 + rng.poisson(p.deployments_per_customer - 1 + 0.3 * log(1.0 + cust.weight.to_numpy()))
    owner = np.repeat(np.arange(len(cust)), k)
    c = cust.iloc[owner].reset_index(drop=True)
    n = len(c)
    first = np.r_[True, owner[1:] != owner[:-1]]
    start = np.where(first, c.start_day, rng.uniform(c.start_day, p.n_days))
    span = rng.exponential(p.deployment_days, n) + 1.0
    end = np.minimum(start + np.where(first & (rng.random(n) < 0.25), p.n_days, span), p.n_days)
    fam_names = np.array(list(FAMILIES))
    fam_w = np.tile(FAMILY_WEIGHTS, (n, 1))
    fam_w[np.arange(n), c.family_bias.to_numpy()] += 1.0
    fam_idx = (fam_w.cumsum(1) / fam_w.sum(1, keepdims=True) > rng.random(n)[:, None]).argmax(1)
    workload = rng.integers(0, len(lab.latent), n)
    ratio = np.array(list(FAMILIES.values()))[fam_idx]
    # Customers size VMs to hold their working set: the smallest size >= 1.2x the footprint.
    need = 1.2 * lab.latent.footprint_gb.to_numpy()[workload] / ratio
    fit = VCPUS[np.minimum(np.searchsorted(VCPUS, need), len(VCPUS) - 1)]
    vcpus = np.maximum(rng.choice(VCPUS, n, p=VCPU_WEIGHTS), fit)
    family, footprint_gb = fam_names[fam_idx], lab.latent.footprint_gb.to_numpy()[workload]
    if p.shape == "azure":   # Azure's sizes; the workload's instance keeps the share of memory it has on its own size
        share_of_memory = footprint_gb / (fit * ratio)
        vcpus = rng.choice(AZURE_VCPUS, n, p=AZURE_VCPU_WEIGHTS)
        family = rng.choice(np.array(list(AZURE_GB_PER_VCPU)), n, p=AZURE_GB_WEIGHTS)
        ratio = pd.Series(family).map(AZURE_GB_PER_VCPU).to_numpy()
        footprint_gb = share_of_memory * vcpus * ratio
    gen = rng.choice([3, 4, 5], n, p=[0.3, 0.4, 0.3])
    regions = np.array(REGIONS[: p.n_regions])
    region = np.where(rng.random(n) < 0.8, c.home_region, rng.choice(regions, n))
    cluster = rng.integers(0, p.clusters_per_region, n)
    share = rng.gamma(0.7, 1.0, n)
    share /= pd.Series(share).groupby(owner).transform("sum").to_numpy()
    active = np.maximum(end - start, 1e-3)
    return pd.DataFrame({
        "owner": owner, "customer_id": c.customer_id, "start": start, "end": end, "active": active,
        "vm_type": ("Standard_" + pd.Series(family) + pd.Series(vcpus).astype(str)
                    + "s_v" + pd.Series(gen).astype(str)),
        "vcpus": vcpus, "memory_gb": vcpus * ratio,
        "region": region, "cluster_id": pd.Series(region) + "-c" + pd.Series(cluster).astype(str).str.zfill(2),
        "os": np.where(c.windows_pref ^ (rng.random(n) < 0.1), "windows", "linux"),
        "workload": workload,
        "rate_weight": c.weight.to_numpy() * share,
        "life_median_h": exp(rng.normal(1.5, 1.8, n)),
        "footprint_gb": footprint_gb,
    })


def azure_lifetimes_h(deployment_median_h: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Lifetimes whose distribution is the trace's (``AZURE_LIFE_CDF``), each VM's drawn near its deployment's:
    the deployment's median life, ranked among all, sets where on the CDF its VMs fall."""
    from scipy.special import ndtr, ndtri

    dep = ndtri((np.argsort(np.argsort(deployment_median_h, kind="stable"), kind="stable") + 0.5)
                / len(deployment_median_h)) if len(deployment_median_h) else deployment_median_h
    z = AZURE_LIFE_RHO * dep + np.sqrt(1.0 - AZURE_LIFE_RHO ** 2) * rng.standard_normal(len(dep))
    hours, cdf = (np.array(c) for c in zip(*AZURE_LIFE_CDF))
    return exp(np.interp(ndtr(z), cdf, log(hours)))


def build_vms(lab: Lab, p: FleetParams, variant: str = "pond") -> pd.DataFrame:
    """The ``vms`` table, with ``_workload_idx`` and ``_cycles`` helper columns for counters."""
    rng = np.random.default_rng([p.seed, 2])
    first_day, burn_in, trace_days = pd.Timestamp(p.start, tz="UTC"), p.burn_in_days, p.n_days
    if burn_in:   # the fleet runs from burn_in_days before the trace, which keeps only the VMs alive on its first day
        p = p.model_copy(update={"n_days": trace_days + burn_in,
                                 "start": (first_day - pd.Timedelta(days=burn_in)).strftime("%Y-%m-%d")})
    cust = _customers(p, rng, variant)
    dep = _deployments(cust, lab, p, rng)
    # vms_per_day creations a day on the trace's own days: a deployment's days in the burn-in do not count
    inside = dep.active if not burn_in else np.clip(dep.end - np.maximum(dep.start, burn_in), 0.0, None)
    rate = dep.rate_weight / (dep.rate_weight * inside).sum() * p.vms_per_day * trace_days
    counts = rng.poisson(rate * dep.active)
    d = dep.loc[np.repeat(dep.index.to_numpy(), counts)].reset_index(drop=True)
    n = len(d)
    day = d.start.to_numpy() + rng.random(n) * d.active.to_numpy()
    order = np.argsort(day, kind="stable")
    d, day = d.iloc[order].reset_index(drop=True), day[order]
    life_h = (d.life_median_h.to_numpy() * exp(rng.normal(0.0, 1.0, n)) if p.shape == "footprint"
              else azure_lifetimes_h(d.life_median_h.to_numpy(), rng))
    t0 = pd.Timestamp(p.start, tz="UTC")
    created = t0 + pd.to_timedelta(np.round(day * 86400.0), unit="s")
    deleted = created + pd.to_timedelta(np.round(life_h * 3600.0 + 60.0), unit="s")
    horizon = t0 + pd.Timedelta(days=p.n_days)
    kept = np.asarray(deleted > first_day)   # all of them without a burn-in
    d, day, life_h = d[kept].reset_index(drop=True), day[kept], life_h[kept]
    created, deleted = created[kept], deleted[kept]
    n = len(d)
    running = deleted > horizon
    c = cust.iloc[d.owner.to_numpy()]
    cluster_effect = pd.Series(rng.normal(0, 0.25, d.cluster_id.nunique()),
                               index=np.unique(d.cluster_id)).reindex(d.cluster_id).to_numpy()
    fp_gb = d.footprint_gb.to_numpy()
    logit = (c.level.to_numpy() + c.drift.to_numpy() * day
             + 0.25 * INV_LN2 * log(d.memory_gb.to_numpy() / TYPICAL_GB[p.shape])
             - 0.4 * (d.os.to_numpy() == "windows")
             - 0.12 * log(life_h)
             + cluster_effect
             + c.consistency.to_numpy() * rng.standard_normal(n))
    footprint_cap = np.clip(1.0 - 0.5 * fp_gb / d.memory_gb.to_numpy(), 0.1, 1.0)
    untouched = np.round(footprint_cap / (1.0 + exp(-logit)), 4)
    elapsed = np.clip((horizon - created) / pd.Timedelta(hours=1) / life_h, 0.0, 1.0)
    so_far = np.round(1.0 - (1.0 - untouched) * power(elapsed, 0.25), 4)
    vms = pd.DataFrame({
        "vm_id": _ids("vm-", n, 8),
        "customer_id": d.customer_id, "cluster_id": d.cluster_id,
        "server_id": pd.Series([None] * n, dtype="string"),
        "region": d.region, "vm_type": d.vm_type, "vcpus": d.vcpus.astype("int64"),
        "memory_gb": d.memory_gb.astype(float), "os": d.os,
        "created_at": created, "deleted_at": deleted.where(~running),
        "untouched_fraction": np.where(running, np.nan, untouched),
        "untouched_so_far": np.where(running, so_far, np.nan),
        "workload_id": lab.latent.workload_id.to_numpy()[d.workload.to_numpy()],
    })
    vms["_workload_idx"] = d.workload.to_numpy()
    vms["_cycles"] = d.vcpus.to_numpy() * 3600.0 * 2.5e9 * rng.uniform(0.05, 0.9, n)
    vms["_has_counters"] = rng.random(n) < p.counter_coverage
    return vms


def iter_counters(vms: pd.DataFrame, lab: Lab, p: FleetParams, chunk: int = 200_000) -> Iterator[pd.DataFrame]:
    """``vm_counters`` in chunks: workload rates x the VM's cycles x per-VM, per-event noise."""
    rng = np.random.default_rng([p.seed, 3])
    rates = lab.rates.to_numpy(np.float64)
    have = vms[vms._has_counters]
    for lo in range(0, len(have), chunk):
        part = have.iloc[lo: lo + chunk]
        noise = exp(rng.normal(0.0, p.counter_noise, (len(part), rates.shape[1])))
        counts = np.round(rates[part._workload_idx.to_numpy()] * part._cycles.to_numpy()[:, None] * noise)
        out = pd.DataFrame(counts, columns=lab.rates.columns)
        out.insert(0, "vm_id", part.vm_id.to_numpy())
        yield out


AB_TEST_DELAY = pd.Timedelta(hours=1)   # an internal VM's A/B run: once its first hour is counted


def build_vm_slowdowns(vms: pd.DataFrame, lab: Lab, p: FleetParams, lab_params: LabParams) -> pd.DataFrame | None:
    """``vm_slowdowns``: every VM of the internal customers (``internal_share`` of them, Pond §4.4) that
    lives past its first hour is run once entirely on pool memory at each lab latency ratio, with the lab's
    run-to-run noise. None when no customer is internal."""
    if p.internal_share <= 0:
        return None
    rng = np.random.default_rng([p.seed, 4])
    customers = np.unique(vms.customer_id.to_numpy(str))
    internal = customers[rng.random(len(customers)) < p.internal_share]
    measured_at = vms.created_at + AB_TEST_DELAY
    horizon = pd.Timestamp(p.start, tz="UTC") + pd.Timedelta(days=p.n_days)
    alive = vms.deleted_at.isna().to_numpy() | (vms.deleted_at >= measured_at).fillna(False).to_numpy(bool)
    picked = vms.customer_id.isin(internal).to_numpy() & alive & (measured_at < horizon).to_numpy()
    tested, at = vms[picked], measured_at[picked].to_numpy()
    lat = lab.latent.iloc[tested._workload_idx.to_numpy()].reset_index(drop=True)
    parts = [pd.DataFrame({"vm_id": tested.vm_id.to_numpy(), "latency_ratio": float(ratio), "spilled_pct": 100.0,
                           "slowdown_pct": measured(pool_slowdown(lat, ratio, 100.0), rng, lab_params).round(3),
                           "measured_at": at})
             for ratio in lab_params.latency_ratios]
    return pd.concat(parts, ignore_index=True)
