"""``skyhop check``: which providers' credentials are found and usable, cached for the optimizer."""

from __future__ import annotations

import asyncio

from skyhop.cli.output import info, print_json, table

__all__ = ["run_check"]

_CHECK_TIMEOUT_S = 30.0


async def _check_all() -> dict[str, object]:
    from skyhop.providers.base import CheckResult
    from skyhop.providers.registry import all_provider_names, get_provider

    async def one(name: str) -> CheckResult:
        try:
            return await asyncio.wait_for(get_provider(name).check(), _CHECK_TIMEOUT_S)
        except TimeoutError:
            return CheckResult(enabled=False, reason=f"no answer within {_CHECK_TIMEOUT_S:g}s")
        except Exception as exc:  # a broken SDK install must not hide the other providers' verdicts
            return CheckResult(enabled=False, reason=f"{type(exc).__name__}: {exc}")

    names = all_provider_names()
    results = await asyncio.gather(*(one(name) for name in names))
    return dict(zip(names, results, strict=True))


def run_check(json_output: bool) -> int:
    """Check every provider, record the verdicts, print them; exit 0 when at least one is enabled."""
    from skyhop.cli.output import fail
    from skyhop.providers.base import CheckResult
    from skyhop.providers.registry import CHECKS_STATE, write_checks
    from skyhop.storage.content import load_store_config
    from skyhop.storage.errors import StorageError
    from skyhop.storage.shared_state import state_key

    results = {name: CheckResult.model_validate(r) for name, r in asyncio.run(_check_all()).items()}
    try:
        write_checks(results)
    except StorageError as exc:
        fail(f"cannot record the verdicts for the workers: {exc}")
    if json_output:
        print_json("providers", [{"provider": n, **r.model_dump()} for n, r in results.items()])
    else:
        rows = [[name, "enabled" if r.enabled else "disabled", r.reason] for name, r in results.items()]
        table(["PROVIDER", "STATUS", "DETAILS"], rows)
        for name, result in results.items():
            if not result.enabled and result.hint:
                info(f"  {name}: {result.hint}")
        where = f"{load_store_config().url}/{state_key(CHECKS_STATE)}"
        info(f"Recorded in {where} for every worker; disabled providers are never launch candidates.")
    return 0 if any(r.enabled for r in results.values()) else 1
