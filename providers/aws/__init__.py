"""The ``aws`` provider: EC2 through boto3."""

from skyhop.providers.aws.provider import AWSProvider

__all__ = ["AWSProvider"]
