"""Local stand-ins for external systems that cannot run on a test machine, with their real semantics."""
