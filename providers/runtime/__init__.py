"""What runs on, or talks to, a node: the node-side job runner and its controller-side models."""
