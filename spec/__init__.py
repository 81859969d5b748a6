"""The declarative IR: ``Task`` and ``Resources`` in SkyPilot's YAML format, validated with field paths."""

from skyhop.spec.dag import Dag, DagTask, Execution
from skyhop.spec.errors import SpecError
from skyhop.spec.job_group import JobGroup, Placement
from skyhop.spec.loader import TaskOverrides, load_dag, load_task, looks_like_yaml_path, task_from_dict
from skyhop.spec.quantity import Quantity, parse_memory, parse_quantity
from skyhop.spec.resources import KNOWN_INFRA, JobRecovery, Resources, parse_accelerators
from skyhop.spec.service import Service
from skyhop.spec.task import GitWorkdir, Task

__all__ = [
    "KNOWN_INFRA",
    "Dag",
    "DagTask",
    "Execution",
    "GitWorkdir",
    "JobGroup",
    "JobRecovery",
    "Placement",
    "Quantity",
    "Resources",
    "Service",
    "SpecError",
    "Task",
    "TaskOverrides",
    "load_dag",
    "load_task",
    "looks_like_yaml_path",
    "parse_accelerators",
    "parse_memory",
    "parse_quantity",
    "task_from_dict",
]
