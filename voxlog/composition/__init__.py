"""The composition root: each process built from its settings, its resources opened, run until stopped.

Settings become the services' config objects in :mod:`.configs` and nowhere
else. Every process opens its resources through one ``AsyncExitStack``
(:mod:`.resources`), so a failure half-way through start-up closes what was
already open, in reverse order, and a normal stop closes everything the same
way. The worker's root is :mod:`.worker`; the others are in :mod:`.processes`.
"""

from voxlog.composition.configs import (
    limits,
    projector_config,
    retry_policy,
    sweeper_config,
    worker_config,
    worker_id_of,
)
from voxlog.composition.processes import run_api, run_node, run_projector, run_sweeper
from voxlog.composition.resources import load_configured_engine
from voxlog.composition.worker import run_worker

__all__ = [
    "limits",
    "load_configured_engine",
    "projector_config",
    "retry_policy",
    "run_api",
    "run_node",
    "run_projector",
    "run_sweeper",
    "run_worker",
    "sweeper_config",
    "worker_config",
    "worker_id_of",
]
