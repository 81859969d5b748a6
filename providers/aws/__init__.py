"""The ``aws`` provider: EC2 through boto3."""

from providers.aws.provider import AWSProvider

__all__ = ["AWSProvider"]
