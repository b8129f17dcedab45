"""KnowHub settings (pydantic-settings, ``HIVESTREAM_KB_*`` environment variables), secrets redacted."""

from __future__ import annotations

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from streams.redaction.redact import RedactionMode

DEFAULT_KB_WINDOW_MS = 86_400_000


class ExperienceSettings(BaseSettings):
    """How experiences are prepared, deduplicated and extracted.

    Attributes:
        privacy_mode: ``strict`` (default: redact before anything is written) or ``relaxed``
            (the seed's ``privacyMode``).
        require_approval: experiences wait in ``pending`` for a reviewer (the seed's
            ``requireApproval``; default True). When False a clean experience is approved at once;
            a flagged one is quarantined either way.
        window_ms: experience dedup window W in ms (0 = unbounded). Default 1 day: the same
            lesson submitted by several agents of one working day is one experience whose count
            grows; the same lesson a week later is a new confirmation with its own review.
        extraction_enabled: run the server-side extractor on ``agent_end`` events (default off).
        extraction_base_url: the OpenAI-compatible endpoint's base URL (``…/v1``); loopback or
            HTTPS only (the seed's local-first rule).
        extraction_model: the model name sent with each request.
        extraction_api_key: bearer token, kept secret (never printed or logged).
        extraction_threshold: items with confidence at or below this are dropped (seed: 0.7).
        extraction_timeout_s: per-request timeout, seconds.
    """

    model_config = SettingsConfigDict(env_prefix="HIVESTREAM_KB_", extra="ignore")

    privacy_mode: RedactionMode = RedactionMode.STRICT
    require_approval: bool = True
    window_ms: int = Field(DEFAULT_KB_WINDOW_MS, ge=0)
    extraction_enabled: bool = False
    extraction_base_url: str = "http://127.0.0.1:8000/v1"
    extraction_model: str = "local"
    extraction_api_key: SecretStr | None = None
    extraction_threshold: float = Field(0.7, ge=0.0, le=1.0)
    extraction_timeout_s: float = Field(60.0, gt=0)

    @property
    def window(self) -> int | None:
        """W in ms, or None when unbounded."""
        return self.window_ms if self.window_ms > 0 else None
