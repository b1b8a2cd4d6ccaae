"""The change feed: what a change records (written in its transaction) and the feed's endpoint and retention."""
