"""Functions (user-defined functions, UDF format 1): list, load, register and drop.

The REST spec only reads functions (listFunctions, loadFunction). A platform team puts one into
the catalog by registering a metadata file that already exists in storage (``python -m
scripts.functions register``), as registerTable does for tables: the file must lie inside the
warehouse's allowed locations, stay within the size limits, fit the contract's
``FunctionMetadata`` schema and the format's rules (``app.rules.function_metadata``). Growler never
writes or deletes function files.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import jsonschema

from app.authorization import Authorizer
from app.catalog.entries import Entries
from app.catalog.paging import Page, names_window, page_of_names
from app.ground.errors import BadRequest, NoSuchFunction, NoSuchNamespace
from app.ground.limits import load_json
from app.ground.page_tokens import PageTokens
from app.ground.settings import Settings
from app.namespaces.warehouses import WarehouseDirectory
from app.rules.function_metadata import check_function_metadata
from app.rules.identifiers import check_name, format_namespace
from app.rules.metadata_files import decode_metadata
from app.rules.privileges import Kind, Privilege, Securable
from storage.functions import FunctionRepository, FunctionRow
from storage.objects import ObjectNotFound, ObjectStore
from storage.repository import CatalogRepository

SchemaCheck = Callable[[Any], None]


def function_metadata_schema(spec: dict[str, Any]) -> SchemaCheck:
    """The contract's ``FunctionMetadata`` schema as a check raising BadRequest (400)."""
    validator = jsonschema.Draft4Validator(
        {"$ref": "#/components/schemas/FunctionMetadata", "components": spec["components"]}
    )

    def check(document: Any) -> None:
        error = jsonschema.exceptions.best_match(validator.iter_errors(document))
        if error is not None:
            where = "/".join(str(part) for part in error.absolute_path) or "the document"
            raise BadRequest(f"Invalid function metadata at {where}: {error.message}"[:500])

    return check


class FunctionService:
    def __init__(
        self,
        settings: Settings,
        repository: FunctionRepository,
        catalog: CatalogRepository,
        objects: ObjectStore,
        warehouses: WarehouseDirectory,
        check_schema: SchemaCheck,
        *,
        authorizer: Authorizer,
        page_tokens: PageTokens,
    ) -> None:
        self.authorizer = authorizer  # required: no permissive default (app/authorization.py)
        self.page_tokens = page_tokens  # the installation's key (one for all workers): app/edge/factory.py
        self.settings = settings
        self.repository = repository
        self.catalog = catalog
        self.objects = objects
        self.warehouses = warehouses
        self.check_schema = check_schema

    def list_names(
        self, prefix: str, namespace: tuple[str, ...], page_token: str | None, page_size: int | None
    ) -> Page:
        warehouse = self.warehouses.get(prefix)
        window = names_window(
            "listFunctions",
            warehouse.name,
            namespace,
            page_token,
            page_size,
            self.settings.max_page_size,
            self.page_tokens,
        )
        page = page_of_names(
            window,
            lambda after, limit: self.repository.list_names(warehouse.id, namespace, after, limit),
        )
        securable = Securable.of_entry(Kind.FUNCTION, prefix, namespace, "")  # its namespace's grants
        # Without READ none of them is visible: no token either (pages of nothing would count them).
        return page if self.authorizer.may(Privilege.READ, securable) else Page([], None)

    def load(self, prefix: str, namespace: tuple[str, ...], name: str) -> FunctionRow:
        warehouse = self.warehouses.get(prefix)
        row = self.repository.load(warehouse.id, namespace, check_name(name, "function name"))
        if row is None:
            if not self.catalog.namespace_exists(warehouse.id, namespace):
                raise NoSuchNamespace(f"Namespace does not exist: {format_namespace(namespace)}")
            raise NoSuchFunction(f"Function does not exist: {format_namespace((*namespace, name))}")
        return row

    def register(self, prefix: str, namespace: tuple[str, ...], name: str, metadata_location: str) -> FunctionRow:
        """Put an existing, valid function metadata file into the catalog under ``name``."""
        warehouse = self.warehouses.get(prefix)
        name = check_name(name, "function name")
        location = Entries.require_inside_warehouse(warehouse, metadata_location, "metadata-location")
        limits = self.settings.limits
        try:
            text = decode_metadata(self.objects.read(location, limits.max_metadata_bytes), limits.max_inflated_bytes)
        except ObjectNotFound as exc:
            raise BadRequest(f"Metadata file does not exist: {metadata_location}") from exc
        except (UnicodeDecodeError, OSError, EOFError) as exc:
            raise BadRequest(f"Not a valid function metadata file: {metadata_location}") from exc
        document = load_json(text, limits, "function metadata file", items=False)
        self.check_schema(document)
        check_function_metadata(document)
        row = FunctionRow(name, document["function-uuid"], location.uri, json.dumps(document, separators=(",", ":")))
        self.repository.insert(warehouse.id, namespace, row)
        return row

    def drop(self, prefix: str, namespace: tuple[str, ...], name: str) -> None:
        warehouse = self.warehouses.get(prefix)
        if not self.repository.delete(warehouse.id, namespace, check_name(name, "function name")):
            raise NoSuchFunction(f"Function does not exist: {format_namespace((*namespace, name))}")
