"""The storage tests' S3: moto's server (the provider tests' fixture), emptied for each test."""

from __future__ import annotations

from collections.abc import Iterator

import boto3
import pytest

from tests.providers.aws_support import reset
from tests.providers.conftest import moto

__all__ = ["moto", "s3"]


@pytest.fixture
def s3(moto: str) -> Iterator[object]:
    """A boto3 S3 client on an empty moto, as the user's own scripts would see the buckets."""
    reset(moto)
    yield boto3.session.Session().client("s3", region_name="us-east-1")
