"""The Kubernetes provider (``infra: k8s``), being built: so far what a cluster can hold (``offerings``)."""
