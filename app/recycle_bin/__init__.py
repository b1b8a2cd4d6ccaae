"""The recycle bin: list, undrop, purge, recursive drop, expiry."""
