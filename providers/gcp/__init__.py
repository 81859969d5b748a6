"""gcp: Compute Engine instances (provider.py), the catalog (catalog.csv), its pricing client (pricing.py)."""
