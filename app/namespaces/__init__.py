"""Namespaces and the warehouse directory (warehouses and their object stores)."""
