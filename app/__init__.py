"""Growler: an Apache Iceberg REST catalog on PostgreSQL and object storage."""

from app.factory import create_app

__all__ = ["create_app"]
