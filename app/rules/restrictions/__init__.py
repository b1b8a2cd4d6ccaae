"""Read restrictions (issue 51): the policies (``policies``: what applies to a caller, rendered for an
engine or for Growler's own readers), which column actions take which types (``applicability``:
no pyarrow, so the authorizer's path never loads it) and the actions applied to Arrow data
(``actions``: the console's preview and exports)."""
