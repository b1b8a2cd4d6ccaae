"""The pure rules: Iceberg metadata rules and identifier parsing, with no I/O.

Nothing here touches the network, files, the database or the clock (time comes in as
``now_ms``); nothing here loads a web framework or a database driver. The services call these
functions and do the I/O around them. Only ``app.ground`` is imported from.
"""
