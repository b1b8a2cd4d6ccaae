"""The management API: principals, roles, grants, warehouses, and who may use it (rights, the operations' rows)."""
