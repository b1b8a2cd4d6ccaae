"""Deletion protection marks on a warehouse, namespace, table or view (set, remove, list)."""
