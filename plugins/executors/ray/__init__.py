"""The `ray` executor: `--executor ray [--ray-address ADDR]`.

Generation runs in Ray actors that each hold one model (one per GPU where the cluster has
GPUs) and are reused for the whole run; scoring runs in one evaluation actor per node,
each with its own pre-warmed sandbox pool. Ray is imported only when a run names this
executor, so no other command pays for it.
"""

from __future__ import annotations

from typing import Any, Mapping

from coral_core.config.settings import flag_help, metavar
from coral_core.hookspecs import hookimpl
from coral_core.types import RunFlag


def create_executor(settings: Mapping[str, Any]):
    """The `[execution]` section: `ray_address` ("" starts a local Ray), `workers`
    (sandbox workers per node), `generation_actors`, `evaluation_actors`; and
    `CORAL_RAY_STALL_SECONDS`, how long a run waits without any call finishing before it
    gives up (docs/ray.md, Faults)."""
    from .executor import RayExecutor

    return RayExecutor(settings)


def check_settings(settings: Mapping[str, Any]) -> None:
    """What can be refused before Ray starts (by `--dry-run` too): the stall setting and an
    address that cannot be one."""
    from coral_core.executors.ray_cluster import check_address

    from .executor import stall_seconds

    stall_seconds()
    if settings.get("ray_address"):
        check_address(str(settings["ray_address"]))


create_executor.check_settings = check_settings  # type: ignore[attr-defined]


def builds_models_here(settings: Mapping[str, Any]) -> bool:
    """Models are built in the generation actors: on this machine for a Ray of Coral's
    own (no address, or "local"), else on the cluster's machines, whose devices and files
    the driver (a login node without a GPU, say) does not judge."""
    return str(settings.get("ray_address") or "") in ("", "local")


create_executor.builds_models_here = builds_models_here  # type: ignore[attr-defined]


@hookimpl
def coral_register_executors(register):
    register("ray", create_executor)


@hookimpl
def coral_register_run_flags(register):
    register("ray_address", RunFlag(("execution", "ray_address"), str,
                                    help=flag_help("execution.ray_address"),
                                    metavar=metavar("execution.ray_address") or ""))
