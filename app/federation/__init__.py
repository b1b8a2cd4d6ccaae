"""Federated warehouses: catalog operations served by another Iceberg REST catalog (issue 50)."""
