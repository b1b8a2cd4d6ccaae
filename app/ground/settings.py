"""All configuration, read once from environment variables (documented in docs/operations.md, "Configuration")."""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from app.ground.limits import Limits
from app.ground.locations import InvalidLocation, Location

WAREHOUSE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
# Path segments that follow /v1/ directly in unprefixed routes; a warehouse with one of
# these names would make /v1/<name>/... ambiguous, so they are refused.
RESERVED_PREFIXES = frozenset({"config", "oauth", "namespaces", "tables", "views", "transactions"})


# A recycle bin's retention (issue 35): "7d", "12h", "30m", "45s" or a number of seconds.
_DURATION = re.compile(r"^\s*(\d{1,9})\s*([smhd]?)\s*$")
_UNIT_S = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86_400}
MAX_RETENTION_S = 3650 * 86_400


def parse_retention(text: object) -> int:
    """Seconds of a retention (``7d``, ``12h``, ``30m``, ``45s``, ``600``); ValueError otherwise."""
    match = _DURATION.match(str(text))
    if not match:
        raise ValueError(f"a retention is a number followed by s, m, h or d (like 7d), not {str(text)[:40]!r}")
    seconds = int(match.group(1)) * _UNIT_S[match.group(2)]
    if not 1 <= seconds <= MAX_RETENTION_S:
        raise ValueError("a retention lies between 1 second and 3650 days")
    return seconds


def format_retention(seconds: int) -> str:
    """The shortest spelling ``parse_retention`` reads back (``604800`` -> ``7d``)."""
    for unit in ("d", "h", "m"):
        if seconds % _UNIT_S[unit] == 0:
            return f"{seconds // _UNIT_S[unit]}{unit}"
    return f"{seconds}s"


# AWS STS and SeaweedFS issue credentials for 900 s at least.
MIN_STS_DURATION_S = 900


def default_credentials_mode(env: Mapping[str, str]) -> str:
    """``GROWLER_STORAGE_CREDENTIALS_MODE``, else ``sts`` where an STS is configured (a role or an
    STS endpoint: ``make run``'s embedded SeaweedFS has one) and ``remote-signing`` where none is.

    ``sts`` honours what each client asks for: ``vended-credentials`` gets table-scoped temporary
    credentials, ``remote-signing`` the signer (app/storage_access/delegation.py).
    """
    explicit = env.get("GROWLER_STORAGE_CREDENTIALS_MODE", "").strip().lower()
    if explicit:
        return explicit
    return "sts" if env.get("GROWLER_STS_ROLE_ARN") or env.get("GROWLER_STS_ENDPOINT") else "remote-signing"


def _bool(value: str | None, default: bool) -> bool:
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_int(env: Mapping[str, str], name: str, default: int) -> int:
    """An integer setting; a malformed value is a start-up error naming the variable."""
    raw = env.get(name, "")
    try:
        return int(raw) if raw else default
    except ValueError as exc:
        raise ValueError(f"{name} must be an integer, got {raw!r}") from exc


def env_float(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name, "")
    try:
        return float(raw) if raw else default
    except ValueError as exc:
        raise ValueError(f"{name} must be a number, got {raw!r}") from exc


@dataclass(frozen=True)
class S3Settings:
    endpoint: str | None = None
    access_key: str | None = None
    secret_key: str | None = None
    region: str = "us-east-1"
    path_style: bool = True
    timeout_s: float = 5.0  # connect, and each wait for an answer (GROWLER_S3_TIMEOUT_S)

    def __repr__(self) -> str:  # never print the secret key
        return (
            f"S3Settings(endpoint={self.endpoint!r}, access_key={'***' if self.access_key else None}, "
            f"region={self.region!r}, path_style={self.path_style}, timeout_s={self.timeout_s})"
        )


@dataclass(frozen=True)
class StsSettings:
    """Where ``sts`` mode asks for table-scoped credentials (the S3 endpoint when unset)."""

    endpoint: str | None = None
    role_arn: str = ""
    duration_s: int = 3600


@dataclass(frozen=True)
class SparkSettings:
    """Where data compaction beyond the in-process bound runs (app/maintenance/spark.py): a Spark
    job Growler starts with ``submit`` (spark-submit of a Spark installation) on ``master``, with
    the Iceberg runtime ``jars``, as a client of this catalog at ``catalog_uri`` signed in with the
    principal ``credential`` (client id:secret, given to the job in its environment only). Off
    while ``submit`` or ``catalog_uri`` is unset: such partitions are then skipped, and said so."""

    submit: str = ""  # GROWLER_SPARK_SUBMIT
    master: str = "local[2]"  # GROWLER_SPARK_MASTER
    jars: str = ""  # GROWLER_SPARK_JOB_JARS: comma-separated jar paths (the Iceberg Spark runtime, AWS bundle)
    conf: str = ""  # GROWLER_SPARK_CONF: more spark-submit --conf, comma-separated key=value
    java_home: str = ""  # GROWLER_SPARK_JAVA_HOME
    catalog_uri: str = ""  # GROWLER_SPARK_CATALOG_URI: this catalog as the job reaches it
    credential: str = field(default="", repr=False)  # GROWLER_SPARK_CREDENTIAL
    timeout_s: int = 3600  # GROWLER_SPARK_TIMEOUT_S: the job is killed past it

    @property
    def enabled(self) -> bool:
        return bool(self.submit and self.catalog_uri)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> SparkSettings:
        return cls(
            submit=env.get("GROWLER_SPARK_SUBMIT", "").strip(),
            master=env.get("GROWLER_SPARK_MASTER", "").strip() or "local[2]",
            jars=env.get("GROWLER_SPARK_JOB_JARS", "").strip(),
            conf=env.get("GROWLER_SPARK_CONF", "").strip(),
            java_home=env.get("GROWLER_SPARK_JAVA_HOME", "").strip(),
            catalog_uri=env.get("GROWLER_SPARK_CATALOG_URI", "").strip(),
            credential=env.get("GROWLER_SPARK_CREDENTIAL", ""),
            timeout_s=env_int(env, "GROWLER_SPARK_TIMEOUT_S", 3600),
        )


@dataclass(frozen=True)
class HttpLimits:
    """What the HTTP protocol reads of a request, and waits for, before the app sees it
    (app/edge/protocol.py). Read in gunicorn's master (gunicorn.conf.py) for the workers'
    protocol, and here with the rest so that a bad value stops the server at start-up."""

    max_head_bytes: int = 64 * 1024  # request line and headers together (GROWLER_MAX_HEADER_BYTES)
    max_headers: int = 100  # GROWLER_MAX_HEADERS
    # A head must be complete this long after the connection opened (its first request) or after
    # its first byte (later ones); a body, this long after its head (GROWLER_HEADER_TIMEOUT_S,
    # GROWLER_BODY_TIMEOUT_S). Slow networks send 8 MiB well within 30 s; a stalled client is cut.
    head_timeout_s: float = 30.0
    body_timeout_s: float = 30.0

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> HttpLimits:
        limits = cls(
            max_head_bytes=env_int(env, "GROWLER_MAX_HEADER_BYTES", cls.max_head_bytes),
            max_headers=env_int(env, "GROWLER_MAX_HEADERS", cls.max_headers),
            head_timeout_s=env_float(env, "GROWLER_HEADER_TIMEOUT_S", cls.head_timeout_s),
            body_timeout_s=env_float(env, "GROWLER_BODY_TIMEOUT_S", cls.body_timeout_s),
        )
        limits.check()
        return limits

    def check(self) -> None:
        # 1 KiB at least: clients' own headers (authorization, user agent, traceparent) take hundreds
        if self.max_head_bytes < 1024 or self.max_headers < 8:
            raise ValueError("GROWLER_MAX_HEADER_BYTES must be at least 1024 and GROWLER_MAX_HEADERS at least 8")
        if not 0 < self.head_timeout_s <= 3600 or not 0 < self.body_timeout_s <= 3600:
            raise ValueError("GROWLER_HEADER_TIMEOUT_S and GROWLER_BODY_TIMEOUT_S must be between 0 and 3600 seconds")


@dataclass(frozen=True)
class Settings:
    database_url: str = field(repr=False)  # may hold a password
    warehouse: str = "warehouse"
    warehouse_location: str = "s3://growler-warehouse/"
    # extra prefixes where the default warehouse's tables and views may live
    allowed_locations: tuple[str, ...] = ()
    s3: S3Settings = field(default_factory=S3Settings)
    namespace_separator: str = "%1F"
    pool_min_size: int = 1
    pool_max_size: int = 10
    # Reads on the event loop (loadTable, loadNamespaceMetadata) wait in psycopg_pool's queue when
    # more of them run at once than this: the wait costs more CPU than the query (W1, 16 connections
    # on 2 workers: 4 -> 8 took 3,700 to 4,500 req/s and 0.50 -> 0.41 ms of CPU per request).
    async_pool_max_size: int = 8
    pool_timeout_s: float = 5.0
    statement_timeout_ms: int = 15_000
    db_timeout_s: float = 5.0  # connect, and each round trip to PostgreSQL (GROWLER_DB_TIMEOUT_S)
    max_body_bytes: int = 8 * 1024 * 1024
    http: HttpLimits = field(default_factory=HttpLimits)
    max_page_size: int = 1000
    limits: Limits = field(default_factory=Limits)
    idempotency_lifetime_s: int = 1800
    # how long a staged table (stage-create, a create transaction) may be written before its create
    # commits: signing and STS serve its location until then (storage/staged.py)
    stage_lifetime_s: int = 86_400
    # how long the change feed keeps its events (app/events/feed.py); a continuation token older
    # than that is answered 410 (GROWLER_EVENTS_RETENTION_S)
    events_retention_s: int = 7 * 86_400
    # the durable audit trail (docs/audit.md): a record of every request committed before its
    # response starts (GROWLER_AUDIT_TRAIL=on). Off by default while it costs more than the issue's
    # 10% on the cheapest reads (about +20% of server CPU on W1, docs/audit.md "Cost")
    audit_trail: bool = False
    # how long the audit trail keeps its records (docs/audit.md); housekeeping deletes older ones
    audit_retention_days: int = 90
    # the longest an audit batch waits for the requests still in flight (app/audit/writer.py): 0
    # writes each loop turn's records at once; more groups more records per commit, for latency
    audit_gather_ms: float = 1.0
    # push delivery (app/publisher/service.py): a NATS JetStream server every event goes to (off when
    # unset; webhooks and more servers through the management API), and the first retry's delay
    events_nats_url: str | None = None
    events_retry_base_s: float = 0.5
    # networks (CIDRs) webhooks may be delivered to although their addresses are private, loopback,
    # link-local... (app/rules/network_targets.py); none by default (GROWLER_WEBHOOK_ALLOWED_NETWORKS)
    webhook_allowed_networks: tuple[str, ...] = ()
    # how often the background executor looks at a table with a maintenance policy (docs/maintenance.md)
    maintenance_interval_s: int = 3600
    spark: SparkSettings = field(default_factory=SparkSettings)
    validate_responses: bool = False
    log_level: str = "INFO"
    # ``scan-planning-mode`` told to clients (/v1/config defaults, every LoadTableResult's config):
    # "server", "client", or None to say nothing and leave the choice to each client
    scan_planning_mode: str | None = None
    # how clients get at the default warehouse's storage (app/storage_access/delegation.py)
    storage_credentials_mode: str = "remote-signing"
    sts: StsSettings = field(default_factory=lambda: StsSettings())
    # Fernet key that encrypts the storage keys of warehouses made through the management API
    # (app/ground/secrets.py); without it such a warehouse cannot be given keys of its own.
    secrets_key: str | None = field(default=None, repr=False)
    # The default warehouse's deletion policy (others: the management API): "soft" keeps a dropped
    # table, view or namespace in the recycle bin for the retention, "hard" removes it at once.
    deletion_policy: str = "soft"
    deletion_retention: str = "7d"
    # refuse to sign DELETE requests and vend credentials without s3:DeleteObject
    refuse_deletes: bool = False

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        database_url = env.get("GROWLER_DATABASE_URL", "")
        if not database_url:
            raise ValueError("GROWLER_DATABASE_URL is not set (make run sets it for the embedded PostgreSQL)")
        settings = cls(
            database_url=database_url,
            warehouse=env.get("GROWLER_WAREHOUSE", "warehouse"),
            warehouse_location=env.get("GROWLER_WAREHOUSE_LOCATION", "s3://growler-warehouse/"),
            allowed_locations=tuple(
                part.strip() for part in env.get("GROWLER_ALLOWED_LOCATIONS", "").split(",") if part.strip()
            ),
            s3=S3Settings(
                endpoint=env.get("GROWLER_S3_ENDPOINT") or None,
                access_key=env.get("GROWLER_S3_ACCESS_KEY") or None,
                secret_key=env.get("GROWLER_S3_SECRET_KEY") or None,
                region=env.get("GROWLER_S3_REGION", "us-east-1"),
                path_style=_bool(env.get("GROWLER_S3_PATH_STYLE"), True),
                timeout_s=env_float(env, "GROWLER_S3_TIMEOUT_S", 5.0),
            ),
            namespace_separator=env.get("GROWLER_NAMESPACE_SEPARATOR", "%1F"),
            pool_min_size=env_int(env, "GROWLER_DB_POOL_MIN", 1),
            pool_max_size=env_int(env, "GROWLER_DB_POOL_MAX", 10),
            async_pool_max_size=env_int(env, "GROWLER_DB_ASYNC_POOL_MAX", 8),
            pool_timeout_s=float(env.get("GROWLER_DB_POOL_TIMEOUT_S", "5") or 5),
            statement_timeout_ms=env_int(env, "GROWLER_DB_STATEMENT_TIMEOUT_MS", 15_000),
            db_timeout_s=env_float(env, "GROWLER_DB_TIMEOUT_S", 5.0),
            max_body_bytes=env_int(env, "GROWLER_MAX_BODY_BYTES", 8 * 1024 * 1024),
            http=HttpLimits.from_env(env),
            max_page_size=env_int(env, "GROWLER_MAX_PAGE_SIZE", 1000),
            limits=Limits(
                max_json_depth=env_int(env, "GROWLER_MAX_JSON_DEPTH", Limits.max_json_depth),
                max_json_items=env_int(env, "GROWLER_MAX_JSON_ITEMS", Limits.max_json_items),
                max_number_length=env_int(env, "GROWLER_MAX_NUMBER_LENGTH", Limits.max_number_length),
                max_updates=env_int(env, "GROWLER_MAX_UPDATES", Limits.max_updates),
                max_requirements=env_int(env, "GROWLER_MAX_REQUIREMENTS", Limits.max_requirements),
                max_table_changes=env_int(env, "GROWLER_MAX_TABLE_CHANGES", Limits.max_table_changes),
                max_schema_fields=env_int(env, "GROWLER_MAX_SCHEMA_FIELDS", Limits.max_schema_fields),
                max_metadata_bytes=env_int(env, "GROWLER_MAX_METADATA_BYTES", Limits.max_metadata_bytes),
                max_inflated_bytes=env_int(env, "GROWLER_MAX_INFLATED_BYTES", Limits.max_inflated_bytes),
            ),
            idempotency_lifetime_s=env_int(env, "GROWLER_IDEMPOTENCY_LIFETIME_S", 1800),
            stage_lifetime_s=env_int(env, "GROWLER_STAGE_LIFETIME_S", 86_400),
            events_retention_s=env_int(env, "GROWLER_EVENTS_RETENTION_S", 7 * 86_400),
            audit_trail=parse_audit_trail(env.get("GROWLER_AUDIT_TRAIL", "off")),
            audit_retention_days=env_int(env, "GROWLER_AUDIT_RETENTION_DAYS", 90),
            audit_gather_ms=env_float(env, "GROWLER_AUDIT_GATHER_MS", 1.0),
            events_nats_url=env.get("GROWLER_EVENTS_NATS_URL") or None,
            events_retry_base_s=env_float(env, "GROWLER_EVENTS_RETRY_BASE_S", 0.5),
            webhook_allowed_networks=tuple(
                part.strip() for part in env.get("GROWLER_WEBHOOK_ALLOWED_NETWORKS", "").split(",") if part.strip()
            ),
            maintenance_interval_s=env_int(env, "GROWLER_MAINTENANCE_INTERVAL_S", 3600),
            spark=SparkSettings.from_env(env),
            validate_responses=_bool(env.get("GROWLER_VALIDATE_RESPONSES"), False),
            log_level=env.get("GROWLER_LOG_LEVEL", "INFO").upper(),
            scan_planning_mode=env.get("GROWLER_SCAN_PLANNING_MODE", "").strip().lower() or None,
            storage_credentials_mode=default_credentials_mode(env),
            sts=StsSettings(
                endpoint=env.get("GROWLER_STS_ENDPOINT") or None,
                role_arn=env.get("GROWLER_STS_ROLE_ARN", ""),
                duration_s=env_int(env, "GROWLER_STS_DURATION_S", 3600),
            ),
            secrets_key=env.get("GROWLER_SECRETS_KEY") or None,
            deletion_policy=env.get("GROWLER_DELETION_POLICY", "soft").strip().lower() or "soft",
            deletion_retention=env.get("GROWLER_DELETION_RETENTION", "7d").strip() or "7d",
            refuse_deletes=_bool(env.get("GROWLER_REFUSE_DELETES"), False),
        )
        settings.check()
        return settings

    def check(self) -> None:
        """Fail at start-up, not at the first request, on settings that cannot work."""
        if not WAREHOUSE_NAME.match(self.warehouse) or self.warehouse in RESERVED_PREFIXES:
            raise ValueError(f"GROWLER_WAREHOUSE {self.warehouse!r} is not a valid warehouse name")
        if not self.warehouse_location.startswith(("s3://", "file:")):
            raise ValueError("GROWLER_WAREHOUSE_LOCATION must start with s3:// or file:")
        if self.warehouse_location.startswith("s3://") and not self.s3.endpoint:
            raise ValueError("GROWLER_S3_ENDPOINT is required for an s3:// warehouse location")
        named = [("GROWLER_WAREHOUSE_LOCATION", self.warehouse_location)]
        named += [("GROWLER_ALLOWED_LOCATIONS", allowed) for allowed in self.allowed_locations]
        for name, text in named:
            try:
                parsed = Location.parse(text, name)
            except InvalidLocation as exc:
                raise ValueError(exc.message) from exc
            if parsed.scheme == "s3" and not self.s3.endpoint:
                raise ValueError(f"GROWLER_S3_ENDPOINT is required for the s3 location {text} in {name}")
        if self.max_page_size < 1 or self.pool_max_size < 1 or self.async_pool_max_size < 1:
            raise ValueError(
                "GROWLER_MAX_PAGE_SIZE, GROWLER_DB_POOL_MAX and GROWLER_DB_ASYNC_POOL_MAX must be positive"
            )
        self.limits.check()
        self.http.check()
        if not 0 < self.db_timeout_s <= 300 or not 0 < self.s3.timeout_s <= 300:
            raise ValueError("GROWLER_DB_TIMEOUT_S and GROWLER_S3_TIMEOUT_S must be between 0 and 300 seconds")
        if self.storage_credentials_mode not in ("remote-signing", "sts", "static", "none"):
            raise ValueError(
                "GROWLER_STORAGE_CREDENTIALS_MODE must be remote-signing, sts, static or none, "
                f"got {self.storage_credentials_mode!r}"
            )
        if not MIN_STS_DURATION_S <= self.sts.duration_s <= 43200:
            raise ValueError(f"GROWLER_STS_DURATION_S must be between {MIN_STS_DURATION_S} and 43200 seconds")
        if not 60 <= self.stage_lifetime_s <= 7 * 86_400:
            raise ValueError("GROWLER_STAGE_LIFETIME_S must be between 60 seconds and 7 days")
        if not 1 <= self.events_retention_s <= 366 * 86_400:
            raise ValueError("GROWLER_EVENTS_RETENTION_S must be between 1 second and 366 days")
        if not 1 <= self.audit_retention_days <= 3650:
            raise ValueError("GROWLER_AUDIT_RETENTION_DAYS must be between 1 and 3650 days")
        if not 0 <= self.audit_gather_ms <= 50:
            raise ValueError("GROWLER_AUDIT_GATHER_MS must be between 0 and 50 milliseconds")
        if not 0.01 <= self.events_retry_base_s <= 60:
            raise ValueError("GROWLER_EVENTS_RETRY_BASE_S must be between 0.01 and 60 seconds")
        for network in self.webhook_allowed_networks:
            try:
                ipaddress.ip_network(network, strict=False)
            except ValueError:
                raise ValueError(
                    f"GROWLER_WEBHOOK_ALLOWED_NETWORKS: {network!r} is not an address or a network (CIDR)"
                ) from None
        if not 60 <= self.maintenance_interval_s <= 7 * 86_400:
            raise ValueError("GROWLER_MAINTENANCE_INTERVAL_S must be between 60 seconds and 7 days")
        if self.secrets_key is not None:
            from app.ground.secrets import SecretBox

            SecretBox(self.secrets_key)  # a ValueError naming GROWLER_SECRETS_KEY when malformed
        if not self.namespace_separator:
            raise ValueError("GROWLER_NAMESPACE_SEPARATOR must not be empty")
        if self.deletion_policy not in ("soft", "hard"):
            raise ValueError(f"GROWLER_DELETION_POLICY must be soft or hard, got {self.deletion_policy!r}")
        try:
            parse_retention(self.deletion_retention)
        except ValueError as exc:
            raise ValueError(f"GROWLER_DELETION_RETENTION: {exc}") from exc
        if self.scan_planning_mode not in (None, "client", "server"):
            raise ValueError(f"GROWLER_SCAN_PLANNING_MODE must be client or server, got {self.scan_planning_mode!r}")


def parse_audit_trail(value: str) -> bool:
    """GROWLER_AUDIT_TRAIL: ``on`` or ``off``; anything else stops the start (a typo never leaves
    the trail off unnoticed)."""
    text = value.strip().lower()
    if text not in ("on", "off"):
        raise ValueError(f"GROWLER_AUDIT_TRAIL must be on or off, not {value!r}")
    return text == "on"
