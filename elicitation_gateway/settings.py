"""Every setting of the service, read from ``GATEWAY_*`` environment variables (and flags)."""

import base64
import ipaddress
import os
import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AliasChoices, Field, SecretStr, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from elicitation_gateway.stores import schemes as store_schemes

DEFAULT_SESSION_ID = "ses_000000000000ElicitGateway"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="GATEWAY_", extra="ignore", populate_by_name=True)

    host: str = Field("127.0.0.1", description="Address to listen on.")
    port: int = Field(4096, ge=0, le=65535, description="Port to listen on (0 picks a free one).")
    store: str = Field(
        "memory",
        description="Where questions are kept: `memory`, a SQLite file that outlives restarts "
        "(`sqlite:///relative.db`, `sqlite:////absolute/path.db`), or a Redis URL shared by every replica.",
    )
    timeout: float = Field(300, gt=0, description="Default seconds a question waits for an answer.")
    max_timeout: float = Field(
        3600, gt=0, description="The most a tool may ask for with `timeout` or `wait`."
    )
    mcp_progress_interval: float = Field(
        15,
        gt=0,
        description="Seconds between two progress notifications to an MCP call that waits for an answer "
        "and sent a progress token (clients that reset their timeout on progress then wait as long as "
        "the question does: GATEWAY_TIMEOUT).",
    )
    reattach_window: float = Field(
        300,
        ge=0,
        description="Seconds a question stays pending after its caller's connection drops (an MCP call, or "
        "`POST /elicit` with an `Idempotency-Key`), for the same call re-issued to attach to it; then it "
        "is withdrawn. Never past the question's own expiry. 0: withdrawn at once.",
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
    max_finished: int = Field(
        10_000,
        ge=1,
        description="Most finished results the process keeps readable (memory and SQLite stores): past "
        "it, the oldest are forgotten before `GATEWAY_RESULT_TTL` ends. On Redis, results stay in Redis "
        "for their TTL.",
    )
    subscriber_queue: int = Field(
        1000, ge=1, description="Events queued for one slow subscriber before it is disconnected."
    )
    max_body_size: int = Field(1_048_576, ge=1024, description="Largest request body, in bytes.")
    send_timeout: float = Field(
        30,
        gt=0,
        description="Seconds a client may leave what it is sent unread (one write to an event stream, or "
        "any response once 64 KiB wait for it) before it is disconnected.",
    )
    header_timeout: float = Field(
        10,
        gt=0,
        description="Seconds a client has to send a request's headers, from the connection's start and "
        "from the first byte of each later request on it, before its connection is closed.",
    )
    max_header_size: int = Field(
        65_536,
        ge=4096,
        description="Largest request head in bytes (the request line and every header), counted as it "
        "arrives: past it the request is refused with `431` and its connection closed. Bounds the "
        "memory a connection's headers hold.",
    )
    max_headers: int = Field(
        100, ge=10, description="Most headers in one request; more are refused with `431`."
    )
    max_url_length: int = Field(
        8192,
        ge=256,
        description="Longest request URL (path and query) in bytes, which bounds the request line; "
        "longer is refused with `414`.",
    )
    shutdown_grace: float = Field(5, ge=0, description="Seconds to finish pending questions on shutdown.")
    replica_liveness: float = Field(
        10,
        gt=0,
        description="With Redis: seconds a replica's liveness entry lasts unless refreshed (every third of "
        "it). Once a replica's entry lapses, another withdraws the questions whose tool waited on it.",
    )
    log_level: Literal["debug", "info", "warning", "error"] = Field("info", description="Log level.")
    log_format: Literal["text", "json"] = Field("text", description="`text`, or `json` (one object a line).")

    # Security
    tool_token: SecretStr | None = Field(
        None, description="Bearer token required on the tool side (`/elicit`, `/elicitations`, `/mcp`)."
    )
    answerer_password: SecretStr | None = Field(
        None,
        validation_alias=AliasChoices("OPENCODE_SERVER_PASSWORD", "GATEWAY_ANSWERER_PASSWORD"),
        description="HTTP Basic password required on the answerer side (`OPENCODE_SERVER_PASSWORD`).",
    )
    answerer_username: str = Field(
        "opencode",
        validation_alias=AliasChoices("OPENCODE_SERVER_USERNAME", "GATEWAY_ANSWERER_USERNAME"),
        description="HTTP Basic username on the answerer side (`OPENCODE_SERVER_USERNAME`).",
    )
    people: Path | None = Field(
        None,
        description="A TOML file of people and groups (docs/teams.md): on the answerer side, each signs in "
        "with their own HTTP Basic login, beside the shared password if that is set too. Read at start (an "
        "unknown key or a bad entry stops it, naming the entry) and again on SIGHUP (a file that cannot be "
        "used then keeps the one before). Unset: no people.",
    )
    cors_origins: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Origins allowed besides localhost, 127.0.0.1 and the same host (comma-separated).",
    )
    allowed_hosts: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Host names the gateway answers to besides `localhost`, `*.localhost` and IP "
        "addresses (comma-separated: `gateway.example.com`, `*.example.com` for its subdomains, `*` for "
        "any; ports ignored): the public name behind a reverse proxy. Other `Host` headers get `421`, "
        "which is what stops DNS rebinding. The host of `GATEWAY_PUBLIC_URL` is allowed too.",
    )
    forwarded_allow_ips: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: ["127.0.0.1"],
        description="Addresses of the reverse proxies whose `X-Forwarded-For` and `X-Forwarded-Proto` "
        "the gateway believes (comma-separated IP addresses or networks such as `10.0.0.0/8`; `*` for "
        "any, only where nothing but the proxy can reach the gateway). From any other client these "
        "headers are ignored, and logs show the address that connected.",
    )
    allow_sensitive: bool = Field(
        False,
        description="Ask free-text questions that plainly name a password, API key, secret, private key, "
        "access token or card details (with a warning beside them) instead of refusing them.",
    )

    # Limits
    max_options: int = Field(200, ge=1, description="Most options one question may offer.")
    max_text_length: int = Field(
        10_000, ge=1, description="Longest message, title, description, option label or answer (characters)."
    )
    max_pending: int = Field(20_000, ge=1, description="Most questions pending at once, in all.")
    max_pending_per_session: int = Field(1_000, ge=1, description="Most questions pending in one session.")
    max_pending_bytes: int = Field(
        256 * 1024 * 1024,
        ge=1024 * 1024,
        description="Most bytes of memory pending questions may hold, in all (each charged what its form, "
        "message and encodings hold; a question of 2 short fields about 9 KB, one of 50 fields with 200 "
        "options each about 11 MB).",
    )
    max_pending_bytes_per_session: int = Field(
        64 * 1024 * 1024,
        ge=1024 * 1024,
        description="Most bytes of memory pending questions may hold in one session.",
    )
    history_bytes: int = Field(
        64 * 1024 * 1024,
        ge=0,
        description="Most bytes of events kept for `Last-Event-ID` replay (besides `GATEWAY_HISTORY_SIZE`); "
        "older ones are dropped, and a client that asks for them gets the pending questions again.",
    )
    max_subscribers: int = Field(10_000, ge=1, description="Most open event streams at once.")
    subscriber_buffer: int = Field(
        256 * 1024,
        ge=128 * 1024,
        description="Most bytes one event stream may leave unread, in the process and the kernel together "
        "(its client then waits, or is disconnected after `GATEWAY_SEND_TIMEOUT`); it bounds what a client "
        "that stops reading holds, and how fast one far away can read (about this much a round trip).",
    )
    mcp_get_stream_lifetime: float = Field(
        300,
        gt=0,
        description="Seconds a `GET /mcp` stream stays open (counted with the event streams): the gateway "
        "sends nothing on it, so it is then ended, and its client opens another if it wants one.",
    )

    # OpenCode bridge
    opencode_url: str | None = Field(
        None,
        description="URL of a running `opencode serve` to bridge: the OpenCode TUI attached to the gateway "
        "then sees both (see docs/opencode-bridge.md). Unset: no bridge.",
    )
    opencode_timeout: float = Field(
        60,
        gt=0,
        description="Seconds the OpenCode server may take to start answering a forwarded request (504 "
        "after); prompts that wait on a model have no limit.",
    )

    # Notifications
    notify: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Apprise URLs told of every new question (`ntfy://…`, `slack://…`, `json://…`, "
        "separated by commas or spaces; needs `elicitation-gateway[notify]`); one Apprise cannot parse stops "
        "the start. Unset: no notifications.",
    )
    public_url: str | None = Field(
        None,
        description="The gateway's address as a person opens it (`https://gateway.example.com`): "
        "notifications link to the question's page there. Unset: no link.",
    )
    link_secret: SecretStr | None = Field(
        None,
        description="The secret one-tap links in people's notifications are signed with (docs/teams.md), at "
        "least 32 characters (`openssl rand -base64 32`). Every replica must have the same, or a link made "
        "on one is refused by another. Unset: a random secret of each process, whose links stop working "
        "when it restarts.",
    )
    notify_timeout: float = Field(
        10,
        gt=0,
        description="Seconds one attempt to notify one target may take (the look-up of its question "
        "included); then the worker process sending it is killed. Also Apprise's connect and read "
        "timeouts (`cto`, `rto`) where the URL sets none.",
    )
    notify_retries: int = Field(
        3,
        ge=0,
        description="Attempts after a failed one, for each target on its own (0.5 s before the first, "
        "doubled each time); the other targets are never sent it again.",
    )
    notify_remind: float = Field(
        0,
        ge=0,
        description="Seconds before a question expires to notify again while it is unanswered (only "
        "questions whose timeout is longer get a reminder). 0: no reminders.",
    )

    # Webhooks
    webhook_urls: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="URLs sent every `question.*` event as a POST signed as Standard Webhooks says "
        "(comma-separated; docs/deploying.md#webhooks). Needs `GATEWAY_WEBHOOK_SECRET`. Unset: no webhooks.",
    )
    webhook_secret: SecretStr | None = Field(
        None,
        validate_default=True,
        description="The webhooks' signing secret, `whsec_` and the base64 of 24 to 64 random bytes "
        "(`whsec_$(openssl rand -base64 32)`); receivers verify with the same.",
    )

    # The audit trail
    audit_retention: float = Field(
        90 * 86400,
        ge=0,
        description="How long the audit trail (`GET /audit`) keeps an entry: seconds, or days with a "
        "`d` (`30d`). The default is 90 days. 0: kept for ever. Kept in the store: in memory, in the "
        "SQLite file, or in Redis.",
    )

    @field_validator("audit_retention", mode="before")
    @classmethod
    def _audit_retention(cls, value: object) -> object:
        if isinstance(value, str) and value.strip().lower().endswith("d"):
            try:
                return float(value.strip()[:-1]) * 86400
            except ValueError:
                raise ValueError("seconds, or days with a 'd' (30d)") from None
        return value

    @field_validator("webhook_urls", mode="before")
    @classmethod
    def _webhook_urls(cls, value: object) -> object:
        if isinstance(value, str):
            value = [url.strip() for url in value.split(",") if url.strip()]
        if isinstance(value, list):
            for position, url in enumerate(value, start=1):  # by position: a URL may hold a token
                if not re.fullmatch(r"https?://[^\s/@]+(/\S*)?", str(url)):
                    raise ValueError(
                        f"URL number {position} is not an http:// or https:// URL without credentials"
                    )
        return value

    @field_validator("webhook_secret", mode="before")
    @classmethod
    def _webhook_secret(cls, value: object, info: ValidationInfo) -> object:
        if value == "" or value is None:
            if info.data.get("webhook_urls"):
                raise ValueError("GATEWAY_WEBHOOK_URLS needs it: every webhook is signed")
            return None
        text = value.get_secret_value() if isinstance(value, SecretStr) else str(value)
        try:
            secret = base64.b64decode(text.removeprefix("whsec_"), validate=True)
        except ValueError:
            secret = b""
        if not text.startswith("whsec_") or not 24 <= len(secret) <= 64:
            raise ValueError("must be whsec_ and the base64 of 24 to 64 random bytes")
        return value

    @field_validator("link_secret", mode="before")
    @classmethod
    def _link_secret(cls, value: object) -> object:
        if value == "" or value is None:
            return None
        text = value.get_secret_value() if isinstance(value, SecretStr) else str(value)
        if len(text) < 32:
            raise ValueError("must be at least 32 characters (openssl rand -base64 32 makes one)")
        return value

    @field_validator("notify", mode="before")
    @classmethod
    def _urls(cls, value: object) -> object:
        if isinstance(value, str):
            return [url for url in re.split(r"[,\s]+", value) if url]
        return value

    @field_validator("public_url", mode="before")
    @classmethod
    def _public_url(cls, value: object) -> object:
        if value is None or (isinstance(value, str) and not value.strip()):
            return None
        if not isinstance(value, str) or not re.fullmatch(r"https?://[^\s/?#@]+(/[^\s?#]*)?", value.strip()):
            raise ValueError("must be an http:// or https:// URL without credentials, e.g. https://host")
        return value.strip().rstrip("/")

    @field_validator("opencode_url", mode="before")
    @classmethod
    def _opencode_url(cls, value: object) -> object:
        if value is None or (isinstance(value, str) and not value.strip()):
            return None
        if not isinstance(value, str) or not re.fullmatch(r"https?://[^\s/?#]+(/[^\s?#]*)?", value.strip()):
            raise ValueError(
                "must be the OpenCode server's http:// or https:// URL, e.g. http://127.0.0.1:4096"
            )
        return value.strip().rstrip("/")

    @field_validator("store")
    @classmethod
    def _known_store(cls, value: str) -> str:
        store_schemes.check(value)  # a ValueError that says what is wrong
        return value

    @field_validator("tool_token", "answerer_password", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        return None if value == "" else value

    @field_validator("cors_origins", mode="before")
    @classmethod
    def _comma_separated(cls, value: object) -> object:
        if isinstance(value, str):
            return [origin.strip() for origin in value.split(",") if origin.strip()]
        return value

    @field_validator("allowed_hosts", mode="before")
    @classmethod
    def _host_names(cls, value: object) -> object:
        if isinstance(value, str):
            value = value.split(",")
        if not isinstance(value, list):
            return value
        names = []
        for entry in value:
            name = re.sub(r":[0-9]*$", "", str(entry).strip().lower()).removesuffix(".")
            if not name:
                continue
            if not re.fullmatch(r"\*|(\*\.)?[a-z0-9_-]+(\.[a-z0-9_-]+)*", name):
                raise ValueError(
                    f"{entry!r} is not a host name: give names such as gateway.example.com, "
                    "*.example.com (its subdomains) or * (any), without scheme or path"
                )
            names.append(name)
        return names

    @field_validator("forwarded_allow_ips", mode="before")
    @classmethod
    def _proxy_addresses(cls, value: object) -> object:
        if isinstance(value, str):
            value = value.split(",")
        if not isinstance(value, list):
            return value
        entries = [str(entry).strip() for entry in value if str(entry).strip()]
        for entry in entries:
            if entry == "*":
                continue
            try:
                ipaddress.ip_network(entry, strict=False)
            except ValueError:
                raise ValueError(
                    f"{entry!r} is not an IP address or network: give addresses such as 10.0.0.5, "
                    "networks such as 10.0.0.0/8, or * (any)"
                ) from None
        return entries

    @field_validator("session_id")
    @classmethod
    def _session_prefix(cls, value: str) -> str:
        if not value.startswith("ses"):
            raise ValueError("must start with 'ses'")
        return value
