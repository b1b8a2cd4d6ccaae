"""The Iceberg table-metadata rules (see ``updates`` for the account of what they follow)."""
