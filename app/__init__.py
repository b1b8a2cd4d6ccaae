"""Growler: an Apache Iceberg REST catalog on PostgreSQL and object storage.

Nothing is re-exported here: importing a module of ``app`` loads only what that module needs
(the pure rules load no web framework and no database driver). The app factory is
``app.edge.factory.create_app``.
"""
