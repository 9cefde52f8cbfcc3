"""Test kit for hosts and storage backends: run the contract against yourself.

* :class:`StorageBackendContract` — the storage conformance suite (pytest classes
  to subclass with a ``storage`` fixture).
* :class:`CheckpointsContract` — the checkpoint conformance suite (a ``checkpoints`` fixture).
* :class:`FaultyStorage` / :class:`FaultyLog` — a fault-injecting wrapper around
  any storage backend (hold or fail chosen writes), accepted by the reference
  host through ``Host.open(..., wrap_storage=FaultyStorage)``.
* :class:`MemoryStorage` — an in-memory backend that keeps the same rules.

``docs/host-contract.md`` (storage backends) describes how to use them. The kit
depends only on the contract, never on the reference host.
"""

from __future__ import annotations

from host_spec.testing.checkpoint_contract import CheckpointsContract, CheckpointsFactory
from host_spec.testing.faults import FaultyLog, FaultyStorage, disk_full
from host_spec.testing.memory import MemoryCheckpoints, MemoryLog, MemoryStorage
from host_spec.testing.storage_contract import StorageBackendContract, StorageFactory, make_events

__all__ = [
    "CheckpointsContract",
    "CheckpointsFactory",
    "MemoryCheckpoints",
    "FaultyLog",
    "FaultyStorage",
    "MemoryLog",
    "MemoryStorage",
    "StorageBackendContract",
    "StorageFactory",
    "disk_full",
    "make_events",
]
