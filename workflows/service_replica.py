"""One replica of a service, inside its ``ServiceWorkflow``: cluster up, run, probe, go.

``ServiceReplica.run`` brings the replica's own cluster up with the same ``Provisioner`` (with
failover, waiting for capacity) and ``prepare_nodes`` a launch and a managed job use, starts its run
(``start_job``, with ``SKYHOP_SERVE_PORT`` set to the port ``choose_replica_port`` gave it), then
probes it on a workflow timer (``probe_replica``: has the run ended, does it answer the readiness
probe). Its ``ReplicaRecord`` says where it stands; ``changed`` tells the service, which pushes the
READY set to the load balancer. The run returns once the replica has failed, in SkyServe's kinds:
FAILED (its run ended, or could not be started), FAILED_INITIAL_DELAY (not ready within
``initial_delay_seconds``), FAILED_PROBING (was READY, then NOT_READY for
``consecutive_failure_threshold_timeout``), or PREEMPTED (its run ended or its probe failed, and
the provider says its nodes are gone: asked with ``node_statuses``, as a managed job asks, when the
run ends, when a READY replica first fails its probe, and before any other failure is declared).
Its cluster is removed whatever ends it: that, or a cancellation (scaled down, replaced by a newer
version, ``serve down``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from skyhop.activities import jobs, serve
    from skyhop.activities.models import RunJobInput
    from skyhop.activities.serve import ProbeAnswer, ReplicaPortInput, ReplicaProbe
    from skyhop.contract import SHORT_QUEUE, JobStatus, setup_key
    from skyhop.contract.clusters import JobRecord
    from skyhop.contract.failures import innermost_message
    from skyhop.contract.serve import SERVE_PORT_ENV, ReplicaRecord, ReplicaStatus
    from skyhop.providers.base import NodeStatus
    from skyhop.serve.service_spec import replica_port, service_of
    from skyhop.spec import Task
    from skyhop.storage.plan import cluster_storage, storage_plan
    from skyhop.workflows.options import SHORT_RETRY, queue_for
    from skyhop.workflows.provisioner import Provisioner, ProvisionSpec, remove_nodes
    from skyhop.workflows.recovery import nodes_lost
    from skyhop.workflows.stages import node_statuses, prepare_nodes, raise_if_cancelled_by, run_long
    from skyhop.workflows.timers import uncancelled_timer

__all__ = ["DEFAULT_FAILURE_TIMEOUT_S", "DEFAULT_PROBE_INTERVAL_S", "DRAIN_WAIT", "Probing", "ServiceReplica"]

DEFAULT_PROBE_INTERVAL_S = 10.0
"""Between two probes of a replica (``endpoint_probe_interval_seconds``), SkyServe's default."""
DEFAULT_FAILURE_TIMEOUT_S = 180.0
"""How long a READY replica may fail its probes before it is replaced
(``consecutive_failure_threshold_timeout``), SkyServe's default."""
_LONG_TIMEOUT = timedelta(hours=24)
DRAIN_WAIT = timedelta(seconds=60)
"""Longest a leaving replica waits for the load balancer to be told before its nodes go."""
_PROBE_RETRY = RetryPolicy(maximum_attempts=1)
"""A probe that could not be made counts as failed; the next one is on the workflow's timer."""


class _Failed(Exception):
    def __init__(self, status: ReplicaStatus, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


class Probing:
    """The service's replicas' probes in flight, so that it continues as new between them.

    An activity still running when a workflow continues as new is abandoned: its answer goes
    nowhere, and on the time-skipping test server it stops time skipping for good (its lock is
    never released: sdk-java#1138). ``hold`` stops new probes and waits until none runs.
    """

    def __init__(self) -> None:
        self.running: set[int] = set()
        """The replicas whose probe is in flight."""
        self.held = False

    @contextlib.asynccontextmanager
    async def probe(self, replica_id: int) -> AsyncIterator[None]:
        """One probe of a replica and what it leads to (asking the provider about the nodes)."""
        if self.held:  # no wait (no turn of the event loop) unless held
            await workflow.wait_condition(lambda: not self.held)
        self.running.add(replica_id)
        try:
            yield
        finally:
            self.running.discard(replica_id)

    async def hold(self) -> None:
        self.held = True
        await workflow.wait_condition(lambda: not self.running)

    def release(self) -> None:
        self.held = False


class ServiceReplica:
    """Replica ``record`` of ``service``, running ``task``; ``changed`` hears each status change.

    ``asks_provider``: whether a failure asks the provider about the nodes (PREEMPTED); False only
    for a service whose history began before replicas did. ``drained(replica_id)``: whether the load
    balancer no longer sends the replica requests; its nodes are removed only then (or after
    ``DRAIN_WAIT``), so no request is routed to a replica whose process is already gone.
    ``probing``: the service's ``Probing``, which each probe goes through. ``cancels_timers``: a
    replica stopped between probes, or drained before ``DRAIN_WAIT``, cancels its timer; True only
    for a service whose history began before its timers were left to fire (``uncancelled_timer``).
    """

    def __init__(
        self,
        service: str,
        record: ReplicaRecord,
        task: Task,
        changed: Callable[[], None],
        *,
        asks_provider: bool = True,
        drained: Callable[[int], bool] | None = None,
        probing: Probing | None = None,
        cancels_timers: bool = False,
    ) -> None:
        self.service = service
        self.record = record
        self.task = task
        self.probe = service_of(task).readiness_probe
        self._changed = changed
        self._asks_provider = asks_provider
        self._drained = drained
        self._probing = probing or Probing()
        self._cancels_timers = cancels_timers
        self._stop_after_probe = False

    def stop(self, run: asyncio.Task[None]) -> None:
        """Cancel ``run`` (this replica's), or have it end once the probe in flight answered: a
        cancel sent while the answer comes races it, and the time-skipping test server refuses
        that workflow task for good (``ACTIVITY_UNKNOWN``), which stops its clock."""
        if self.record.replica_id in self._probing.running:
            self._stop_after_probe = True
        else:
            run.cancel()

    async def run(self) -> None:
        """Until the replica FAILED; its cluster is gone by the time this returns or raises."""
        record = self.record
        try:
            if record.job_key is None:
                await self._bring_up()
            await self._probe_until_failed()
        except _Failed as failed:
            self._set(failed.status, failed.message)
        except BaseException:
            if not record.status.failed:
                self._set(ReplicaStatus.SHUTTING_DOWN, record.message)
            await self._remove()
            raise
        await self._remove()

    async def _bring_up(self) -> None:
        record, task = self.record, self.task
        workflow_id = workflow.info().workflow_id
        self._set(ReplicaStatus.PROVISIONING)
        spec = ProvisionSpec(
            cluster_name=record.cluster_name,
            task=task,
            retry_until_up=True,
            attempt_scope=f"{workflow_id}/replica-{record.replica_id}",
        )
        try:
            provisioned = await Provisioner(spec).provision()
            record.handle = handle = provisioned.handle
            port: int = await workflow.execute_activity(
                serve.choose_replica_port,
                ReplicaPortInput(handle=handle, wanted=replica_port(task)),
                task_queue=queue_for(SHORT_QUEUE, handle),
                start_to_close_timeout=timedelta(seconds=30),
                retry_policy=SHORT_RETRY,
            )
            record.port = port
            self._set(ReplicaStatus.STARTING)
            key = f"{workflow_id}-replica-{record.replica_id}"
            mounts = storage_plan(task.file_mounts)
            await prepare_nodes(handle, task, setup_key(key), mounts=mounts, timeout=_LONG_TIMEOUT)
            job = JobRecord(
                job_id=1,
                name=task.name,
                request_id=key,
                submitted_at=workflow.now().timestamp(),
                status=JobStatus.SETTING_UP,
                task_id=key,
            )
            served = task.model_copy(update={"envs": {**task.envs, SERVE_PORT_ENV: str(port)}})
            await run_long(
                jobs.start_job,
                RunJobInput(
                    handle=handle, job=job, task=served, flush_cached_mounts=cluster_storage(mounts).cached
                ),
                timeout=_LONG_TIMEOUT,
            )
        except (ActivityError, ApplicationError) as exc:
            raise_if_cancelled_by(exc)
            raise _Failed(ReplicaStatus.FAILED, f"could not start: {innermost_message(exc)}") from exc
        record.job_key = job.key
        record.launched_at = workflow.time()  # the initial delay counts from the run's start

    async def _probe_until_failed(self) -> None:
        probe = self.probe
        interval = timedelta(seconds=probe.endpoint_probe_interval_seconds or DEFAULT_PROBE_INTERVAL_S)
        failure_timeout = probe.consecutive_failure_threshold_timeout
        failure_timeout = DEFAULT_FAILURE_TIMEOUT_S if failure_timeout is None else failure_timeout
        while True:
            async with self._probing.probe(self.record.replica_id):
                await self._probe_and_judge(failure_timeout)
            if self._stop_after_probe:  # stopped while asking the provider about the nodes
                raise asyncio.CancelledError
            if self._cancels_timers:
                await workflow.sleep(interval)
            else:
                await uncancelled_timer(interval)

    async def _probe_and_judge(self, failure_timeout: float) -> None:
        """Probe once and set the replica's status from the answer; raise ``_Failed`` when it failed."""
        record, probe = self.record, self.probe
        answer = await self._probe_once()
        if self._stop_after_probe:
            raise asyncio.CancelledError  # stopped meanwhile (``stop``): as if cancelled then
        now = workflow.time()
        if answer.ended:
            raise await self._failure(ReplicaStatus.FAILED, answer.message)
        if answer.ready:
            record.failing_since = None
            if record.status != ReplicaStatus.READY:
                record.ready_at = now
                self._set(ReplicaStatus.READY)
        elif record.status == ReplicaStatus.STARTING:
            if now - record.launched_at >= probe.initial_delay_seconds:
                raise await self._failure(
                    ReplicaStatus.FAILED_INITIAL_DELAY,
                    f"not ready within initial_delay_seconds ({probe.initial_delay_seconds:g}): "
                    f"{answer.message}",
                )
        else:
            if record.failing_since is None:
                record.failing_since = now
            if record.status == ReplicaStatus.READY:
                if (gone := await self._nodes_gone()) is not None:
                    raise _Failed(ReplicaStatus.PREEMPTED, f"{gone}: {answer.message}")
                self._set(ReplicaStatus.NOT_READY, answer.message)
            elif now - record.failing_since >= failure_timeout:
                raise await self._failure(
                    ReplicaStatus.FAILED_PROBING,
                    f"not ready for {failure_timeout:g} s (consecutive_failure_threshold_timeout): "
                    f"{answer.message}",
                )

    async def _probe_once(self) -> ProbeAnswer:
        record = self.record
        assert record.handle is not None and record.job_key is not None and record.port is not None
        request = ReplicaProbe(
            handle=record.handle, job_key=record.job_key, port=record.port, probe=self.probe
        )
        try:
            answer: ProbeAnswer = await workflow.execute_activity(
                serve.probe_replica,
                request,
                task_queue=queue_for(SHORT_QUEUE, request),
                start_to_close_timeout=timedelta(seconds=self.probe.timeout_seconds + 15),
                retry_policy=_PROBE_RETRY,
            )
            return answer
        except ActivityError as exc:
            raise_if_cancelled_by(exc)
            return ProbeAnswer(ready=False, message=f"could not probe: {innermost_message(exc)}")

    async def _failure(self, status: ReplicaStatus, message: str) -> _Failed:
        """The failure to end the replica with: PREEMPTED if the provider says its nodes are gone."""
        gone = await self._nodes_gone()
        return (
            _Failed(status, message)
            if gone is None
            else _Failed(ReplicaStatus.PREEMPTED, f"{gone}: {message}")
        )

    async def _nodes_gone(self) -> str | None:
        """How the provider says the replica's nodes are gone or not UP (``node 0 was preempted``);
        None when they are up, or it cannot tell, or could not be asked."""
        handle = self.record.handle
        if not self._asks_provider or handle is None:
            return None
        try:
            statuses = await node_statuses(handle)
        except ActivityError as exc:
            raise_if_cancelled_by(exc)
            return None
        if statuses is None or not nodes_lost(statuses):
            return None
        return ", ".join(
            status.describe_node(rank) for rank, status in enumerate(statuses) if status != NodeStatus.UP
        )

    async def _remove(self) -> None:
        drained, replica_id = self._drained, self.record.replica_id
        if drained is not None and self.record.handle is not None:
            # On time-out the load balancer could not be told: the replica goes all the same.
            if self._cancels_timers:
                with contextlib.suppress(TimeoutError):
                    await workflow.wait_condition(lambda: drained(replica_id), timeout=DRAIN_WAIT)
            elif not drained(replica_id):
                deadline = uncancelled_timer(DRAIN_WAIT)
                await workflow.wait_condition(lambda: drained(replica_id) or deadline.done())
        handle, self.record.handle = self.record.handle, None
        if handle is not None:  # else a cancelled search removed what its attempt created
            await remove_nodes(handle, f"remove replica {self.record.replica_id}")

    def _set(self, status: ReplicaStatus, message: str | None = None) -> None:
        self.record.status, self.record.message = status, message
        self._changed()
