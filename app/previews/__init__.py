"""The console's data preview: a table's first rows, under the caller's READ."""
