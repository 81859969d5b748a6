"""azure: virtual machines (provider.py), the catalog (catalog.csv), its pricing client (pricing.py)."""
