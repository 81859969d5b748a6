"""``SSHPoolsWorkflow`` (id ``ssh-pools``): the deployment's SSH pools and who holds each host.

An entity workflow, so every worker and the CLI share one inventory without sharing a disk, and
its updates run one at a time in workflow order: two launches racing for the last host get
different answers, one a ``NotEnoughHosts`` refusal (from the validator: it leaves no event).
Every handler is synchronous (no await), so none sees another's half-done change. The rules are
``providers.ssh.inventory.Inventory``'s; a rule's refusal fails only that update (an
``ApplicationError``), never the workflow task. It never ends; it continues as new once its
history is long, after every handler has finished.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from skyhop.contract import WorkflowType
    from skyhop.contract.ssh_pools import (
        AllocatedHosts,
        AllocateHosts,
        MarkPrepared,
        RegisterPools,
        ReleaseHosts,
        RemovePools,
        SSHPoolsError,
        SSHPoolsInput,
        SSHPoolsQuery,
        SSHPoolsUpdate,
    )
    from skyhop.providers.errors import CapacityError
    from skyhop.providers.ssh.inventory import Inventory
    from skyhop.providers.ssh.pools import PoolsError
    from skyhop.workflows.stages import history_is_long

__all__ = ["SSHPoolsWorkflow"]


@workflow.defn(name=WorkflowType.SSH_POOLS)
class SSHPoolsWorkflow:
    @workflow.init
    def __init__(self, input: SSHPoolsInput) -> None:
        self.inventory = input.inventory
        self.history_limit = input.history_limit

    @workflow.run
    async def run(self, input: SSHPoolsInput) -> None:
        await workflow.wait_condition(lambda: history_is_long(self.history_limit))
        await workflow.wait_condition(workflow.all_handlers_finished)
        workflow.continue_as_new(SSHPoolsInput(inventory=self.inventory, history_limit=self.history_limit))

    @workflow.update(name=SSHPoolsUpdate.REGISTER.value)
    def register(self, request: RegisterPools) -> Inventory:
        try:
            self.inventory.register(request.pools, request.identities)
        except PoolsError as exc:
            raise ApplicationError(str(exc), type=SSHPoolsError.POOLS, non_retryable=True) from None
        return self.inventory

    @workflow.update(name=SSHPoolsUpdate.REMOVE.value)
    def remove(self, request: RemovePools) -> Inventory:
        try:
            self.inventory.remove(request.names)
        except PoolsError as exc:
            raise ApplicationError(str(exc), type=SSHPoolsError.POOLS, non_retryable=True) from None
        return self.inventory

    @workflow.update(name=SSHPoolsUpdate.ALLOCATE.value)
    def allocate(self, request: AllocateHosts) -> AllocatedHosts:
        try:  # the validator refused it already if short; never let a bare error fail the task
            hosts = self.inventory.allocate(
                request.cluster, request.pool, request.instance_type, request.num_nodes
            )
        except CapacityError as exc:
            raise ApplicationError(exc.message, type=exc.code, non_retryable=True) from None
        allocations = self.inventory.allocations
        fresh = [rank for rank, host in enumerate(hosts) if not allocations[host.spec.host_id].prepared]
        return AllocatedHosts(hosts=hosts, fresh=fresh)

    @allocate.validator
    def _enough_hosts(self, request: AllocateHosts) -> None:
        """Refuse an allocation that cannot be met before it is accepted: launches racing for the
        last host leave no history event for the ones that lose."""
        try:
            self.inventory.missing(request.cluster, request.pool, request.instance_type, request.num_nodes)
        except CapacityError as exc:
            raise ApplicationError(exc.message, type=exc.code, non_retryable=True) from None

    @workflow.update(name=SSHPoolsUpdate.MARK_PREPARED.value)
    def mark_prepared(self, request: MarkPrepared) -> None:
        self.inventory.mark_prepared(request.cluster, request.host_ids)

    @workflow.update(name=SSHPoolsUpdate.RELEASE.value)
    def release(self, request: ReleaseHosts) -> None:
        self.inventory.release(request.cluster)

    @workflow.query(name=SSHPoolsQuery.INVENTORY.value)
    def state(self) -> Inventory:
        return self.inventory
