"""The ground floor: what the domain, the storage layer and the HTTP edge all stand on.

Errors (the Iceberg error model), settings, metrics definitions, bounds (limits), the location
model and small utilities. Nothing here imports from the rest of the application, and nothing
here loads a web framework or a database driver.
"""
