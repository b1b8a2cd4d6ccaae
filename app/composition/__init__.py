"""The composition root: where every service is built, once, with everything it needs.

``app.edge.factory.create_app`` calls one builder per capability, in dependency order:

- ``storage_and_access`` (here): settings -> the database, the repository, the warehouse
  directory, the object store routed by it, authentication and the authorizer;
- ``app.composition.catalog``: namespaces, tables, views, the recycle bin, protection marks,
  functions, scan planning, remote signing, idempotency, previews;
- ``app.composition.maintenance``: the commit trigger (built first: the table service is
  handed its ``note``), the executor and the maintenance service;
- ``app.composition.events``: the change feed, its sinks and the publisher;
- ``app.composition.housekeeping``: the housekeeper, handed every step it runs;
- ``app.composition.http``: the connexion app, its middleware and the dispatcher with its loop reads.

Every dependency is a constructor argument: no builder sets an attribute on an object another
built (tests/unit/test_layers.py holds that). What handlers and the console reach is one typed
``Services`` (``app.composition.services``).
"""
