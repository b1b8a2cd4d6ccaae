"""The Iceberg view-metadata rules (see ``updates`` for the account of what they follow)."""
