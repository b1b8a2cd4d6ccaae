"""Put functions into the catalog, or take them out: the REST spec only reads them.

    python -m scripts.functions register WAREHOUSE NAMESPACE NAME METADATA_LOCATION
    python -m scripts.functions drop WAREHOUSE NAMESPACE NAME

NAMESPACE is dotted (``a.b``). The metadata file must already exist in storage, inside the
warehouse's allowed locations, and be valid UDF metadata (format version 1); Growler neither
writes nor deletes it. Configuration comes from the same GROWLER_* variables as the server.
"""

from __future__ import annotations

import argparse
import sys

from app.authorization import Authorizer
from app.composition.catalog import build_functions
from app.edge.factory import load_spec
from app.ground.errors import CatalogError
from app.ground.page_tokens import PageTokens, new_key
from app.ground.settings import Settings
from app.namespaces.warehouses import WarehouseDirectory
from storage.build import object_store, open_database


def main(argv: list[str] | None = None, settings: Settings | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.functions", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    register = commands.add_parser("register", help="register an existing function metadata file")
    drop = commands.add_parser("drop", help="remove a function from the catalog (its file stays)")
    for command in (register, drop):
        command.add_argument("warehouse")
        command.add_argument("namespace", help="dotted namespace, e.g. analytics.udfs")
        command.add_argument("name")
    register.add_argument("metadata_location")
    args = parser.parse_args(argv)

    settings = settings or Settings.from_env()
    database, repository = open_database(settings)
    try:
        warehouses = WarehouseDirectory(repository, settings)
        objects = object_store(settings, warehouses)  # each warehouse's own storage
        # The operator's tool: no caller to authorize (it holds the database's credentials anyway).
        # It lists nothing: a page token key of this process alone serves.
        functions = build_functions(
            settings,
            database,
            repository,
            objects,
            warehouses,
            load_spec(),
            authorizer=Authorizer.allow_all(),
            page_tokens=PageTokens(new_key()),
        )
        namespace = tuple(args.namespace.split("."))
        if args.command == "register":
            row = functions.register(args.warehouse, namespace, args.name, args.metadata_location)
            print(f"registered {args.namespace}.{row.name} ({row.uuid}) from {row.metadata_location}")
        else:
            functions.drop(args.warehouse, namespace, args.name)
            print(f"dropped {args.namespace}.{args.name}")
    except CatalogError as exc:
        print(f"error: {exc.error_type}: {exc.message}", file=sys.stderr)
        return 1
    finally:
        database.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
