"""Serving's data plane: the load balancer process a service's controller drives, and the
autoscaler's policy. The controller (``ServiceWorkflow``) pushes READY replica sets to the load
balancer's control port and reads its request counts (``skyhop.contract.serve``)."""
