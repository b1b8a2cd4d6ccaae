"""The composition root: where every service is built, once, with everything it needs.

``app.edge.factory.create_app`` calls one builder per capability, in dependency order:

- ``app.composition.storage`` (``build_foundation``): settings -> the database, the repository,
  the warehouse directory, the object store routed by it, authentication, the authorizer and
  the management API's rights;
- ``app.composition.catalog``: namespaces, tables, views, the recycle bin, protection marks,
  functions, scan planning, remote signing, idempotency, previews (each capability's package
  holds its one service class: ``app.tables``, ``app.planning``, ``app.previews``, ...);
- ``app.composition.maintenance``: the executor, the job runner and the maintenance service (the
  commit trigger is built first, by the factory: the table service is handed its ``note``);
- ``app.composition.events``: the change feed (``app.events``), its sinks (``app.event_sinks``)
  and the publisher (``app.publisher``);
- ``app.composition.management``: the management API's service, and the housekeeper, handed
  every step it runs.

The factory then builds the HTTP app over them: the connexion app, its middleware and the
dispatcher with its loop reads. Every dependency is a constructor argument: no builder sets an
attribute on an object another built (tests/unit/test_layers_services.py holds that). What
handlers and the console reach is one typed ``Services`` (``app.composition.services``).
"""
