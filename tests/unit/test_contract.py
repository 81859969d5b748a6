"""The contract's enums are the only names: error types, retry policies and stages agree with the code."""

from __future__ import annotations

from skyhop.contract import ErrorType, LaunchStage
from skyhop.contract.clusters import LaunchProgress
from skyhop.providers import errors
from skyhop.providers.errors import RETRY_CANNOT_FIX, ProviderError
from skyhop.workflows.options import LONG_RETRY, SHORT_RETRY


def test_the_retry_policies_refuse_exactly_the_errors_only_the_user_can_fix() -> None:
    user_errors = {error.value for error in ErrorType if not error.retry_can_fix}
    for policy in (SHORT_RETRY, LONG_RETRY):
        assert set(policy.non_retryable_error_types or []) == user_errors
    assert set(RETRY_CANNOT_FIX) <= user_errors  # every provider error that retrying cannot fix
    assert ErrorType.PROVISION_FAILED.retry_can_fix is True


def test_every_provider_error_type_in_the_contract_is_a_provider_error_class() -> None:
    provider_types = {e for e in ErrorType if e.value.endswith("Error") and hasattr(errors, e.value)}
    for error_type in provider_types:
        cls = getattr(errors, error_type.value)
        assert issubclass(cls, ProviderError)
        assert error_type.retry_can_fix == cls.retry_can_fix, error_type


def test_a_stage_reads_back_from_the_json_any_client_sends() -> None:
    progress = LaunchProgress.model_validate_json(
        '{"stage": "setup", "stage_started_at": 1.0, "finished_stages": [["lock", 0.5], ["optimize", 0.1]]}'
    )
    assert progress.stage is LaunchStage.SETUP and not progress.stage.ended
    assert progress.finished_stages[0] == (LaunchStage.LOCK, 0.5)
    assert LaunchStage.FAILED.ended and LaunchStage.DONE.ended


def test_the_workflows_handle_exactly_the_names_the_contract_gives() -> None:
    from temporalio.workflow import _Definition

    from skyhop.contract import ClusterQuery, ClusterUpdate, LaunchQuery, WorkflowType
    from skyhop.workflows.cluster import ClusterWorkflow
    from skyhop.workflows.launch import LaunchWorkflow

    cluster = _Definition.must_from_class(ClusterWorkflow)
    launch = _Definition.must_from_class(LaunchWorkflow)
    assert (cluster.name, launch.name) == (WorkflowType.CLUSTER, WorkflowType.LAUNCH)
    assert set(cluster.updates) == set(ClusterUpdate)
    assert set(cluster.queries) == set(ClusterQuery)
    assert set(launch.queries) == set(LaunchQuery)


def test_the_ssh_pools_workflow_takes_exactly_the_contracts_updates_and_queries() -> None:
    from temporalio.workflow import _Definition

    from skyhop.contract import WorkflowType
    from skyhop.contract.ssh_pools import SSHPoolsQuery, SSHPoolsUpdate
    from skyhop.workflows.ssh_pools import SSHPoolsWorkflow

    pools = _Definition.must_from_class(SSHPoolsWorkflow)
    assert pools.name == WorkflowType.SSH_POOLS
    assert set(pools.updates) == set(SSHPoolsUpdate) and set(pools.queries) == set(SSHPoolsQuery)


def test_the_node_runner_writes_the_statuses_the_controller_reads() -> None:
    from skyhop.providers.runtime import node_runner
    from skyhop.providers.runtime.jobs import NodeJobStatus

    written = [node_runner.STARTING, node_runner.RUNNING, node_runner.SUCCEEDED, node_runner.FAILED]
    assert {*written, node_runner.CANCELLED} == {status.value for status in NodeJobStatus}
    assert {s for s in NodeJobStatus if s.done} == {
        NodeJobStatus(node_runner.SUCCEEDED),
        NodeJobStatus(node_runner.FAILED),
        NodeJobStatus(node_runner.CANCELLED),
    }


def test_listing_managed_jobs_loads_neither_the_task_model_nor_the_providers() -> None:
    """``jobs queue`` at 10,000 jobs has a second: importing the task model and the providers took
    0.09 s of it, for models a listing never reads (``contract.job_index``), and the command's runner
    importing its error types (``cli.running``: the log store, the task model) 0.12 s more."""
    import subprocess
    import sys

    probe = (
        "import sys, skyhop.cli.app, skyhop.cli.jobs_listing, skyhop.cli.session, skyhop.cli.client\n"
        "from skyhop.cli.running import run_command\n"
        "async def listing():\n"
        "    heavy = ('skyhop.spec', 'skyhop.providers.base', 'skyhop.cli.logs', 'skyhop.storage')\n"
        "    print(sorted(m for m in sys.modules if m.startswith(heavy)))\n"
        "    return 0\n"
        "run_command(listing())\n"
    )
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "[]"
