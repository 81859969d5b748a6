"""A workflow other than the launch that brings nodes up with ``Provisioner`` (its own module, so
the workflow sandbox imports nothing of the tests)."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from skyhop.workflows.provisioner import Provisioner, ProvisionSpec

__all__ = ["PinnedProvisioning"]


@workflow.defn(name="PinnedProvisioning")
class PinnedProvisioning:
    """Provisioning from a starting blocklist inside a pin, as a managed job's recovery will."""

    @workflow.run
    async def run(self, spec: ProvisionSpec) -> str:
        provisioned = await Provisioner(spec).provision()
        return provisioned.request.offering.location
