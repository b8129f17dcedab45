"""Match settings: similarity threshold, top N and token budget, with per-channel overrides."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field


class MatchSettings(BaseModel):
    """How many archived sections one message may pull in.

    Attributes:
        threshold: minimum similarity (unitless, ``-1..1``); a stub is kept when
            ``similarity >= threshold`` (exactly at the threshold is kept). Default 0.65: the
            seed does not give NanoClaw's ``SIMILARITY_THRESHOLD``; cosine similarities of
            ``gemini-embedding-001`` vectors for unrelated texts typically sit well above 0, so
            a threshold near the middle of the range keeps a short stub hook from firing on
            every message while a paraphrased question about its domain still reaches it (the
            seed prefers coarse, domain-wide stubs). Tune per channel against real messages.
        top_n: at most this many stubs per message (``>= 0``). Default 3: the seed's live
            channels hold 3-4 stubs each, and one question rarely concerns more than three
            archived domains.
        token_budget: at most this many archive tokens injected per message (tokens, ``>= 0``).
            Default 4000: stubs are created when ``memory.md`` grows past ~15-20k characters,
            i.e. roughly 4-5k tokens; capping the injection at about that size means a message
            never pulls in more than the memory file would have held before archiving.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    threshold: float = Field(default=0.65, ge=-1.0, le=1.0, allow_inf_nan=False)
    top_n: int = Field(default=3, ge=0)
    token_budget: int = Field(default=4000, ge=0)


class MatchPolicy(BaseModel):
    """Global default :class:`MatchSettings` plus whole-settings overrides per channel.

    Attributes:
        defaults: the settings for channels without an override.
        overrides: channel name → its settings (replacing all three fields for that channel).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    defaults: MatchSettings = MatchSettings()
    overrides: Mapping[str, MatchSettings] = Field(default_factory=dict)

    def for_channel(self, channel: str) -> MatchSettings:
        """The settings that apply to messages on ``channel``."""
        return self.overrides.get(channel, self.defaults)
