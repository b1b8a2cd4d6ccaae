"""The HTTP edge: everything that knows about HTTP, and nothing else.

The app factory (``factory``), the ASGI entry (``asgi``), routing of operationIds to handlers
(``resolver``), the middleware (guards and error rendering in ``http``, request ids, request
logs and metrics in ``observability``, the start-up gate in ``startup``), bounded request
parsing (``validation``), the dispatcher that runs every operation (``dispatch``: its route
table ``operations`` compiled from the yamls, connexion's validation as a library in
``contract``, loadTable, signRequest and other reads on the event loop in ``loop_reads``),
loadTable parsed and table and view answers rendered once for every way
in, the values handlers return and the request they may take (``responses``), idempotent replay
(``idempotency``) and how handlers find their services (``context``). The handlers
in ``handlers/`` belong to this layer: thin functions calling one service method each.
Authentication goes here too: a middleware in front of routing, next to ``RequestGuardMiddleware``.
"""
