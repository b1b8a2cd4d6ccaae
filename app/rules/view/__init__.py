"""The Iceberg view-metadata rules: pure functions, no I/O.

What the catalog service calls to create view metadata, check a view commit's requirements,
apply its updates, and serialise the result. Like ``app.rules.table``: nothing here touches
the network, files, the database or the clock (time comes in as ``now_ms``).

The document is a plain ``dict`` in the spec's shape (``view-uuid``, ``versions``, ...): PyIceberg
0.12's view models (``pyiceberg.view.metadata``) read the wall clock for a missing timestamp and
drop representation types they do not know, so they are not used for the document itself;
PyIceberg's ``Schema`` validates every schema. The rules are those of Java's
``ViewMetadata.Builder`` (Iceberg 1.10/1.11):

* A view's first schema is schema 0 and its first version is version 1; the create request's
  ``view-version`` is rewritten to point at that schema.
* ``add-schema`` reuses the id of an identical schema (same columns and identifier fields), else
  takes the highest id + 1.
* ``add-view-version`` reuses the id of an equal version (equal ignoring ``version-id`` and
  ``timestamp-ms``), else takes ``max(requested id, highest id + 1)``. ``schema-id`` -1 means the
  schema added last in this commit. One SQL representation per dialect (case-insensitive).
* ``set-current-view-version`` -1 means the version added last in this commit. When the current
  version changes, the version log gains one entry, timed by the version when it was added in
  this commit and by ``now_ms`` otherwise.
* ``version.history.num-entries`` (default 10) caps ``versions``: the newest ids are kept, always
  with the current one and those added in this commit; the version log loses entries older than
  an expired version.
* A new current version must keep every dialect of the previous one, unless
  ``replace.drop-dialect.allowed`` is true.

Deliberately different from Java (each documented where it happens): -1 also accepts an add
that reused an existing schema or version id (as ``app.rules.table`` does); requests may only
carry ``sql`` representations and at least one (Java's server refuses other types on create
only, and a view without SQL is unusable); a view's uuid is validated as a UUID.

Errors: a requirement that does not hold raises ``CommitFailed`` (409) naming what was expected
and what was found; anything invalid raises ``BadRequest`` (400).

Split by concern: ``documents`` (the parts validated, a document parsed and written) and
``updates`` (creation, requirements, updates, a commit end to end). A request's parts are parsed
once, by the request models at the edge (``app.rules.requests.views`` calls ``parse_definition``,
``parse_updates`` and ``parse_requirements``); creation and commits take what they parsed. Metadata-file naming,
versions and gzip are shared with tables in ``app.rules.metadata_files``. This package exports
what the services and tests use.
"""

from app.rules.metadata_files import METADATA_PATH, metadata_file_name, next_metadata_version
from app.rules.view.documents import (
    REPLACE_DROP_DIALECT_ALLOWED,
    VERSION_HISTORY_SIZE,
    ViewMetadata,
    current_version,
    history_size,
    metadata_directory,
    parse_view_metadata,
    to_json,
)
from app.rules.view.updates import (
    ViewChange,
    ViewDefinition,
    apply_updates,
    check_requirements,
    commit,
    new_view_metadata,
    parse_definition,
    parse_requirements,
    parse_updates,
)

__all__ = [
    "METADATA_PATH",
    "REPLACE_DROP_DIALECT_ALLOWED",
    "VERSION_HISTORY_SIZE",
    "ViewChange",
    "ViewDefinition",
    "ViewMetadata",
    "apply_updates",
    "check_requirements",
    "commit",
    "current_version",
    "history_size",
    "metadata_directory",
    "metadata_file_name",
    "new_view_metadata",
    "next_metadata_version",
    "parse_definition",
    "parse_requirements",
    "parse_updates",
    "parse_view_metadata",
    "to_json",
]
