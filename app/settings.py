"""Every setting of the service, read from ``GATEWAY_*`` environment variables (and flags)."""

import os
from typing import Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_SESSION_ID = "ses_000000000000ElicitGateway"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="GATEWAY_", extra="ignore")

    host: str = Field("127.0.0.1", description="Address to listen on.")
    port: int = Field(4096, ge=0, le=65535, description="Port to listen on (0 picks a free one).")
    store: str = Field("memory", description="Where questions are kept: `memory`.")
    timeout: float = Field(300, gt=0, description="Default seconds a question waits for an answer.")
    max_timeout: float = Field(
        3600, gt=0, description="The most a tool may ask for with `timeout` or `wait`."
    )
    directory: str = Field(
        default_factory=os.getcwd,
        description="Directory of questions that name none (the working directory).",
    )
    session_id: str = Field(DEFAULT_SESSION_ID, description="`sessionID` of questions whose tool names none.")
    max_questions: int = Field(50, ge=1, description="Hard limit of questions in one elicitation.")
    header_length: int = Field(12, ge=2, description="Longest question header; longer titles are shortened.")
    heartbeat: float = Field(10, gt=0, description="Seconds between `server.heartbeat` events.")
    history_size: int = Field(1000, ge=0, description="Question events kept for `Last-Event-ID` replay.")
    result_ttl: float = Field(600, gt=0, description="Seconds a finished result stays readable.")
    subscriber_queue: int = Field(
        1000, ge=1, description="Events queued for one slow subscriber before it is disconnected."
    )
    max_body_size: int = Field(1_048_576, ge=1024, description="Largest request body, in bytes.")
    send_timeout: float = Field(30, gt=0, description="Seconds a stalled SSE client may block one send.")
    shutdown_grace: float = Field(5, ge=0, description="Seconds to finish pending questions on shutdown.")
    log_level: Literal["debug", "info", "warning", "error"] = Field("info", description="Log level.")

    @field_validator("store")
    @classmethod
    def _known_store(cls, value: str) -> str:
        if value != "memory":
            raise ValueError("only the in-memory store ('memory') is available")
        return value

    @field_validator("session_id")
    @classmethod
    def _session_prefix(cls, value: str) -> str:
        if not value.startswith("ses"):
            raise ValueError("must start with 'ses'")
        return value
