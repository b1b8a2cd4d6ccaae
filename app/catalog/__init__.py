"""Catalog core: what tables and views share (entries), the one commit loop, keyset paging, the deletion policy."""
