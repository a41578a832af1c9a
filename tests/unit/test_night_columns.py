"""`train_um` reads only the columns its nights use: the request, the customer's history and the outcome."""

from __future__ import annotations

from pond.models.um_protocol import night_columns


def test_ids_and_other_columns_are_not_read():
    names = ["vm_id", "customer_id", "vm_type", "vcpus", "memory_gb", "os", "region", "cluster_id", "created_at",
             "deleted_at", "untouched_fraction", "untouched_so_far", "workload_id", "day", "cust_n", "cust_p50",
             "history_vms", "has_history", "a_foreign_column"]
    assert night_columns(names) == ["vm_type", "vcpus", "memory_gb", "os", "region", "cluster_id", "created_at",
                                    "deleted_at", "untouched_fraction", "cust_n", "cust_p50"]
    assert "cluster_id" not in night_columns([n for n in names if n != "cluster_id"])   # optional: not asked for

