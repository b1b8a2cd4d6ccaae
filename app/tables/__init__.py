"""Tables: the table service (create, load, commit, drop), its storage access, what a worker
remembers, metrics reports."""
