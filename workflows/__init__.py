"""skyhop's Temporal workflows and their public contract (see ``contract``)."""
