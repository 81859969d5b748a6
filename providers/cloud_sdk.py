"""A tagged-instance cloud reached through a blocking SDK: one session, calls in a thread, errors classified.

The cloud SDKs (boto3, google-cloud-compute, azure-mgmt-*) block, so every call runs in a worker
thread with the provider's session, built on first use. Whatever the SDK raises comes out as the
cloud's classified ``ProviderError``, so failover sees a scope and never an SDK exception; an error
no classifier claims (a bug in skyhop) propagates unchanged.
"""

from __future__ import annotations

import asyncio
from abc import abstractmethod
from collections.abc import Callable
from typing import ClassVar, Generic, TypeVar

from skyhop.providers.base import CheckResult
from skyhop.providers.cloud import CloudProvider
from skyhop.providers.errors import ProviderError, SdkMissingError
from skyhop.providers.extras import ExtraMissingError, require_extra

__all__ = ["SdkCloudProvider"]

S = TypeVar("S")
T = TypeVar("T")

Classifier = Callable[[BaseException], ProviderError | None]


class SdkCloudProvider(CloudProvider, Generic[S]):
    """A ``CloudProvider`` whose cloud calls go through a blocking SDK session of type ``S``."""

    setup_hint: ClassVar[str]
    """How to set credentials up, shown when ``check`` finds them missing or rejected."""

    def __init__(self, open_session: Callable[[], S], classify: Classifier) -> None:
        self._open_session = open_session
        self._classify = classify
        self._session: S | None = None

    def session(self) -> S:
        """The SDK session, opened (which may authenticate, so may raise) on first use.

        The SDK is the provider's extra: without it, every call fails with ``SdkMissingError``,
        which fails over to another provider and which ``check`` shows as the reason.
        """
        if self._session is None:
            try:
                require_extra(self.name, self.name)
            except ExtraMissingError as exc:
                raise SdkMissingError(str(exc)) from None
            self._session = self._open_session()
        return self._session

    @abstractmethod
    def whoami(self, session: S) -> str:
        """Who the credentials authenticate as, asked of the cloud (a blocking call)."""

    async def _call(self, work: Callable[[S], T]) -> T:
        """Run blocking SDK calls in a thread with the session; their errors come out classified."""
        try:
            return await asyncio.to_thread(lambda: work(self.session()))
        except ProviderError:
            raise
        except Exception as exc:
            classified = self._classify(exc)
            if classified is None:
                raise
            raise classified from exc

    async def check(self) -> CheckResult:
        try:
            reason = await self._call(self.whoami)
        except SdkMissingError as exc:
            return CheckResult(enabled=False, reason=exc.message)
        except ProviderError as exc:
            return CheckResult(enabled=False, reason=f"{exc.code}: {exc.message}", hint=self.setup_hint)
        return CheckResult(enabled=True, reason=reason)
