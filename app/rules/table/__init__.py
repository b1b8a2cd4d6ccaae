"""The Iceberg table-metadata rules: pure functions, no I/O.

What the catalog service calls to create table metadata, check a commit's requirements, apply its
updates, and name and serialise the resulting metadata file. Nothing here touches the network,
files, the database or the clock: time comes in as ``now_ms`` and the caller writes the files.

PyIceberg 0.12 (``pyiceberg.table.metadata`` and ``pyiceberg.table.update``) supplies the models,
the parsing of requirements and updates, and the handlers whose rules match the Java reference
implementation (``TableMetadata.Builder``). Where PyIceberg is missing something or differs from
Java in a way clients notice, this module fills the gap; each such place says why. In short:

* The models are subclassed so a commit never drops what PyIceberg does not model: a snapshot's
  ``key-id``, statistics blobs of any ``type``, the table's ``encryption-keys``. Writing v3 metadata
  works (PyIceberg refuses), and serialising never reads PyIceberg's config file.
* add-schema / add-spec / add-sort-order assign the id themselves and reuse an identical existing
  one, as Java does; PyIceberg appends the client's object with the client's id.
* add-snapshot checks the sequence number for v3 too, checks the parent, and keeps
  ``next-row-id`` instead of nulling it when ``added-rows`` is missing.
* Removals of things that are already gone (snapshots, schemas, specs, statistics, properties)
  are no-ops, as in Java; PyIceberg raises (``remove-properties`` with a ``KeyError``).
* Timestamps come from ``now_ms``; PyIceberg reads the wall clock.
* ``assign_fresh_schema_ids`` drops ``initial-default``/``write-default``; ours keeps them.

Deliberately stricter or more lenient than Java (each documented at its function): a table's
uuid cannot be reassigned; a snapshot's parent must exist; a different encryption key under a
used id is refused; ``-1`` ("last added") also accepts an add that reused an existing id.

Errors: a requirement that does not hold raises ``CommitFailed`` (409) naming what was expected and
what was found; anything invalid in a request raises ``BadRequest`` (400). No ``ValueError``,
``KeyError`` or pydantic ``ValidationError`` escapes.

The rules are split by concern, as PyIceberg splits ``pyiceberg.table.update``:

- ``models``: the metadata, update and requirement models and the table properties read here;
- ``serialisation``: parsing metadata documents and writing the canonical metadata-file text;
- ``requests``: a commit request's requirements and updates, parsed;
- ``requirements``: checking them;
- ``schemas``: schema evolution (schemas, partition specs, sort orders);
- ``snapshots``: snapshots, refs, statistics, the snapshot log;
- ``creation``: a new table (createTable, and the empty table of a staged create);
- ``updates``: applying updates, and a commit end to end;
- ``files``: the folders a table owns (``table_roots``; its own files, ``table_files``), where its
  metadata files go, the manifest lists a commit adds, and which ones a commit may delete; naming,
  versions and gzip are shared with views in ``app.rules.metadata_files``.

This package exports what the services and tests use.
"""

from app.rules.metadata_files import metadata_file_name, next_metadata_version, parse_metadata_version
from app.rules.table.creation import new_table_metadata
from app.rules.table.files import (
    DATA_PATH_PROPERTIES,
    added_manifest_lists,
    data_path,
    files_of_entry,
    metadata_directory,
    metadata_files_to_delete,
    relocates,
    stored_roots,
    table_files,
    table_roots,
)
from app.rules.table.models import TableMetadata, TableUpdate
from app.rules.table.requests import TableRequirement, parse_requirements, parse_updates
from app.rules.table.requirements import DocumentFields, check_requirements, document_fields
from app.rules.table.serialisation import SnapshotJson, current_location, parse_metadata, refs_only, table_uuid, to_json
from app.rules.table.updates import Screen, apply_updates, commit, screen_for

__all__ = [
    "DATA_PATH_PROPERTIES",
    "SnapshotJson",
    "TableMetadata",
    "TableRequirement",
    "TableUpdate",
    "added_manifest_lists",
    "apply_updates",
    "DocumentFields",
    "Screen",
    "check_requirements",
    "commit",
    "document_fields",
    "current_location",
    "data_path",
    "files_of_entry",
    "metadata_directory",
    "metadata_file_name",
    "metadata_files_to_delete",
    "new_table_metadata",
    "next_metadata_version",
    "parse_metadata",
    "parse_metadata_version",
    "parse_requirements",
    "parse_updates",
    "refs_only",
    "relocates",
    "screen_for",
    "stored_roots",
    "table_files",
    "table_roots",
    "table_uuid",
    "to_json",
]
