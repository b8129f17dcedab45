"""Settings (pydantic-settings): from ``HIVESTREAM_*`` environment variables or arguments."""

from __future__ import annotations

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from streams.model.body_hash import KeyStrategy

DEFAULT_WINDOW_MS = 600_000  # 10 min; see README "Choosing the window"
DEFAULT_ALLOWED_LATENESS_MS = 60_000
DEFAULT_MAX_BODY_BYTES = 524_288  # 512 KiB of UTF-8 after stripping the prefix


class Settings(BaseSettings):
    """hivestream settings.

    Attributes:
        window_ms: dedup window W in ms; 0 means unbounded (env ``HIVESTREAM_WINDOW_MS``).
        allowed_lateness_ms: watermark lag behind the max event time, ms.
        key_strategy: ``body`` or ``body+event``.
        max_body_bytes: largest accepted body, UTF-8 bytes after stripping the prefix.
        batch_size: captures (records, for ``hivestream project``) per DuckDB transaction. Each
            commit writes the batch to DuckDB's WAL and may checkpoint, so larger batches cost less
            per capture (measured on the 200,000-event backlog: 36 µs of the runner's CPU per
            capture at 20,000, 28 µs at 50,000, 28 µs at 100,000) while memory grows with the
            batch (peak RSS 364, 437, 589 MiB). Batches are smaller when there is less: the runner
            commits at the end of each file, the projector what one poll returns.
        kafka_bootstrap_servers: Kafka ``bootstrap.servers`` (env ``KAFKA_BOOTSTRAP_SERVERS``
            is read too).
        kafka_sasl_password: SASL password, kept as a secret (redacted in reprs and logs).
        topic_namespace: prefix of every topic name.
        partitions: partition count of the topics hivestream creates.
    """

    model_config = SettingsConfigDict(env_prefix="HIVESTREAM_", extra="ignore")

    window_ms: int = Field(DEFAULT_WINDOW_MS, ge=0)
    allowed_lateness_ms: int = Field(DEFAULT_ALLOWED_LATENESS_MS, ge=0)
    key_strategy: KeyStrategy = KeyStrategy.BODY
    max_body_bytes: int = Field(DEFAULT_MAX_BODY_BYTES, gt=0)
    batch_size: int = Field(50_000, gt=0)
    kafka_bootstrap_servers: str = Field("127.0.0.1:19092", validation_alias=AliasChoices("KAFKA_BOOTSTRAP_SERVERS", "HIVESTREAM_KAFKA_BOOTSTRAP_SERVERS"))
    kafka_sasl_password: SecretStr | None = None
    topic_namespace: str = Field("hivestream", pattern=r"^[A-Za-z0-9._-]+$")
    partitions: int = Field(4, ge=1, le=1024)

    @property
    def window(self) -> int | None:
        """W in ms, or None when unbounded."""
        return self.window_ms if self.window_ms > 0 else None
