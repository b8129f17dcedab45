"""Settings (pydantic-settings): from ``HIVESTREAM_*`` environment variables or arguments."""

from __future__ import annotations

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from streams.model.body_hash import KeyStrategy

DEFAULT_WINDOW_MS = 600_000  # 10 min; see docs/dedup.md#choosing-the-window
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
        topic_namespace: prefix of every topic name.
        partitions: partition count of the topics hivestream creates.
        replication_factor: replicas of every topic hivestream creates (env
            ``HIVESTREAM_REPLICATION_FACTOR``); None: the broker's ``default.replication.factor``.
        min_insync_replicas: ``min.insync.replicas`` of every topic hivestream creates (env
            ``HIVESTREAM_MIN_INSYNC_REPLICAS``); None: the broker's default.
        standby_replicas: standby copies of each worker table partition that other workers keep by
            reading its changelog (env ``HIVESTREAM_STANDBY_REPLICAS``; Kafka Streams'
            ``num.standby.replicas``, faust's ``table_standby_replicas``). Default 0, as in Kafka Streams:
            faust's default of 1 makes every worker of a group of two read the other's changelog record
            by record through faust's per-record path, which tripled the workers' CPU per event while
            tailing a producer (``bench/RESULTS.md``); a partition that moves is then restored from
            its changelog (from the local store's offset with ``rocksdb://``) before it is processed.

    The Kafka connection (bootstrap servers, security, credentials) is not here: it is
    :class:`streams.kafka.connection.KafkaConnection`, built by ``resolve_connection``.
    """

    model_config = SettingsConfigDict(env_prefix="HIVESTREAM_", extra="ignore")

    window_ms: int = Field(DEFAULT_WINDOW_MS, ge=0)
    allowed_lateness_ms: int = Field(DEFAULT_ALLOWED_LATENESS_MS, ge=0)
    key_strategy: KeyStrategy = KeyStrategy.BODY
    max_body_bytes: int = Field(DEFAULT_MAX_BODY_BYTES, gt=0)
    batch_size: int = Field(50_000, gt=0)
    topic_namespace: str = Field("hivestream", pattern=r"^[A-Za-z0-9._-]+$")
    partitions: int = Field(4, ge=1, le=1024)
    replication_factor: int | None = Field(None, ge=1, le=32_767)
    min_insync_replicas: int | None = Field(None, ge=1, le=32_767)
    standby_replicas: int = Field(0, ge=0, le=16)

    @model_validator(mode="after")
    def _isr_fits(self) -> Settings:
        """``min_insync_replicas`` above ``replication_factor`` is a contradiction (brokers before Kafka 4 refuse every
        ``acks=all`` write to such a topic; Kafka 4.1 accepts the writes, so the setting would promise nothing)."""
        if self.replication_factor and self.min_insync_replicas and self.min_insync_replicas > self.replication_factor:
            raise ValueError(f"min_insync_replicas {self.min_insync_replicas} is above replication_factor {self.replication_factor}: "
                             "no topic can have more in-sync replicas than replicas")
        return self

    @property
    def window(self) -> int | None:
        """W in ms, or None when unbounded."""
        return self.window_ms if self.window_ms > 0 else None
