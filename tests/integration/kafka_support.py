"""A real Apache Kafka broker for the change feed's Kafka sink test (tests/integration/test_event_kafka.py).

The broker's jars (``org.apache.kafka:kafka_2.13`` and its runtime dependencies, pinned in the
Makefile) are fetched by ``make kafka`` into ``.cache/kafka-<version>/libs``; ``GROWLER_KAFKA_HOME``
names another such directory, ``GROWLER_KAFKA_JAVA_HOME`` the JDK (17+). A missing broker is an
error, not a skip. One JVM is broker and controller at once (KRaft: no ZooKeeper) on free loopback
ports with a small heap; its log directory is formatted once with ``kafka.tools.StorageTool`` and
kept across ``stop``/``start``, so a restart finds its topics and offsets as a real one would.
The first start costs some seconds of JVM and storage setup: ``prestart`` (called by the
integration conftest after collection) spends them while earlier tests run.
"""

from __future__ import annotations

import base64
import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path

from tests.integration.keycloak_support import java_home as _keycloak_java_home

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 120
PARTITIONS = 3  # auto-created topics get three partitions: per-key order is what is tested
# A second listener takes SASL SCRAM-SHA-512 (no TLS: SCRAM never sends the password) for this
# user, whose credentials are written into the metadata log when the storage is formatted.
SCRAM_USER = "growler-events"
SCRAM_PASSWORD = "scram-password-of-the-sink"


def kafka_home() -> Path:
    configured = os.environ.get("GROWLER_KAFKA_HOME")
    if configured:
        return Path(configured)
    found = sorted(glob.glob(str(REPO / ".cache" / "kafka-*" / "libs" / "kafka_2.13-*.jar")))
    if not found:
        raise RuntimeError("Kafka not found in .cache: run `make kafka` (or set GROWLER_KAFKA_HOME)")
    return Path(found[-1]).parent.parent


def java() -> str:
    configured = os.environ.get("GROWLER_KAFKA_JAVA_HOME")
    return str(Path(configured or _keycloak_java_home()) / "bin" / "java")


def kafka_cluster_id() -> str:
    """A cluster id as Kafka's own ``Uuid.randomUuid`` makes one: URL-safe base64 of 16 random
    bytes, never starting with '-' (StorageTool's ``-t -xyz`` would read it as an option: one
    format in 64 failed so)."""
    while True:
        made = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not made.startswith("-"):
            return made


class KafkaBroker:
    """One KRaft node (broker + controller) on 127.0.0.1; ``bootstrap`` is its client address."""

    def __init__(self, directory: Path) -> None:
        from scripts.processes import free_port

        self.directory = directory
        self.port, self.controller_port, self.sasl_port = free_port(), free_port(), free_port()
        self.process: subprocess.Popen | None = None
        self.log_path = directory / "kafka.log"
        self._formatted = False

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def sasl_bootstrap(self) -> str:
        """The SASL_PLAINTEXT listener (SCRAM-SHA-512, ``SCRAM_USER``)."""
        return f"127.0.0.1:{self.sasl_port}"

    def _config(self) -> Path:
        path = self.directory / "server.properties"
        path.write_text(
            "\n".join(
                [
                    "process.roles=broker,controller",
                    "node.id=1",
                    f"controller.quorum.voters=1@127.0.0.1:{self.controller_port}",
                    f"listeners=PLAINTEXT://127.0.0.1:{self.port},SASL_PLAINTEXT://127.0.0.1:{self.sasl_port},"
                    f"CONTROLLER://127.0.0.1:{self.controller_port}",
                    f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.port},"
                    f"SASL_PLAINTEXT://127.0.0.1:{self.sasl_port}",
                    "controller.listener.names=CONTROLLER",
                    "inter.broker.listener.name=PLAINTEXT",
                    "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,"
                    "CONTROLLER:PLAINTEXT",
                    "sasl.enabled.mechanisms=SCRAM-SHA-512",
                    "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config="
                    "org.apache.kafka.common.security.scram.ScramLoginModule required;",
                    f"log.dirs={self.directory / 'data'}",
                    f"num.partitions={PARTITIONS}",
                    "auto.create.topics.enable=true",
                    "offsets.topic.replication.factor=1",
                    "offsets.topic.num.partitions=1",
                    "transaction.state.log.replication.factor=1",
                    "transaction.state.log.min.isr=1",
                    "share.coordinator.state.topic.replication.factor=1",
                    "share.coordinator.state.topic.min.isr=1",
                    "group.initial.rebalance.delay.ms=0",
                    "",
                ]
            )
        )
        return path

    def _java(self, main: str, *args: str) -> list[str]:
        classpath = str(kafka_home() / "libs" / "*")
        return [
            java(),
            "-Xms64m",
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-cp",
            classpath,
            main,
            *args,
        ]

    def launch(self) -> None:
        """Format the storage (first time only) and start the JVM; returns at once."""
        config = self._config()
        if not self._formatted:
            cluster_id = kafka_cluster_id()
            subprocess.run(
                self._java(
                    "kafka.tools.StorageTool",
                    *("format", "-t", cluster_id, "-c", str(config)),
                    *("--add-scram", f"SCRAM-SHA-512=[name={SCRAM_USER},password={SCRAM_PASSWORD}]"),
                ),
                check=True,
                capture_output=True,
                timeout=120,
            )
            self._formatted = True
        with open(self.log_path, "ab") as log_file:
            self.process = subprocess.Popen(
                self._java("kafka.Kafka", str(config)),
                stdout=log_file,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    def wait_until_ready(self) -> None:
        """Until the broker accepts clients: its listener is bound only once it has joined the quorum."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"Kafka exited with {self.process.returncode}:\n{self.log_path.read_text()[-4000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"Kafka did not start:\n{self.log_path.read_text()[-4000:]}") from None
                time.sleep(0.1)

    def start(self) -> None:
        self.launch()
        self.wait_until_ready()

    def stop(self) -> None:
        """A controlled shutdown (SIGTERM); SIGKILL if it takes too long."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


class KafkaLauncher:
    """A broker launched ahead of the test that uses it: ``prestart`` formats its storage and starts
    its JVM on a thread of its own (the integration conftest calls it after collection when a test
    uses the broker), ``take`` hands it over, ready, to the fixture that owns it from then on (or
    launches one then), ``stop`` stops one that was never taken."""

    def __init__(self) -> None:
        self._broker: KafkaBroker | None = None
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def prestart(self) -> None:
        if self._thread is not None:
            return
        self._broker = KafkaBroker(Path(tempfile.mkdtemp(prefix="growler-kafka-")))

        def launch() -> None:
            try:
                self._broker.launch()  # type: ignore[union-attr]
            except BaseException as exc:  # noqa: BLE001 - raised again by take
                self._error = exc

        self._thread = threading.Thread(target=launch, name="kafka-prestart", daemon=True)
        self._thread.start()

    def take(self) -> KafkaBroker:
        self.prestart()
        assert self._thread is not None and self._broker is not None
        self._thread.join()
        broker, error = self._broker, self._error
        self._broker, self._thread, self._error = None, None, None
        if error is not None:
            raise RuntimeError("Kafka did not start") from error
        broker.wait_until_ready()
        return broker

    def stop(self) -> None:
        if self._thread is not None and self._broker is not None:
            self._thread.join()
            self._broker.stop()
            shutil.rmtree(self._broker.directory, ignore_errors=True)
        self._broker, self._thread, self._error = None, None, None


KAFKA = KafkaLauncher()
