"""gcp: catalog data (catalog.csv) and its pricing-API client (pricing.py)."""
