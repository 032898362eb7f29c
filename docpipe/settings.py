"""One `Settings` object for every stage, read from arguments, the environment (``DOCPIPE_`` prefix,
``__`` between nested names, e.g. ``DOCPIPE_EXTRACTION__EXTRACTOR=pypdfium2``), a TOML config file and named
presets. Precedence: arguments (and the preset they name) > environment > config file > defaults.

The config file is ``--config PATH`` (`load_settings(config_file=...)`), else ``$DOCPIPE_CONFIG``, else
``config.toml`` in the user config dir (``~/.config/docpipe/config.toml`` on Linux) when it exists; its tables
are the nested settings (``[engine]``, ``[retrieval]``...).

Every model refuses keys it does not know, so a misspelt setting (``retrieval={"kk": 2}`` or
``DOCPIPE_RETRIEVAL__KK=2``) is an error that names it instead of a default silently kept.
"""

from __future__ import annotations

import hashlib
import json
import os
import tomllib
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from pydantic import AliasChoices, BaseModel, Field, SecretStr
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from docpipe.errors import ConfigError
from docpipe.model_files import folder_digest

__all__ = [
    "CONFIG_ENV",
    "PRESETS",
    "AnalysisSettings",
    "ChunkingSettings",
    "EmbeddingSettings",
    "EngineSettings",
    "ExtractionSettings",
    "RaySettings",
    "RetrievalSettings",
    "ReviewSettings",
    "Settings",
    "config_file_path",
    "default_home",
    "load_settings",
    "merge_settings",
    "read_config_file",
]

#: The environment variable naming the config file (``--config`` wins over it).
CONFIG_ENV = "DOCPIPE_CONFIG"
# The file `load_settings(config_file=...)` was given, for the settings source below (which pydantic-settings
# builds without arguments of ours).
_CONFIG_FILE: ContextVar[Path | None] = ContextVar("docpipe_config_file", default=None)


from docpipe.stage_settings import (  # noqa: E402 - the sections, defined beside this module
    DEFAULT_EMBEDDER,
    EXTRACTIVE_MIN_SCORE,
    AnalysisSettings,
    ChunkingSettings,
    EmbeddingSettings,
    EngineSettings,
    ExtractionSettings,
    RaySettings,
    RetrievalSettings,
    ReviewSettings,
)


class Settings(BaseSettings):
    """Every setting docpipe reads: arguments first, then ``DOCPIPE_*`` variables, then the defaults.
    Unknown keys, nested ones included, are refused.

    >>> Settings(retrieval={"k": 2}).retrieval.k
    2
    >>> Settings(retrieval={"kk": 2})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    pydantic_core._pydantic_core.ValidationError: 1 validation error for Settings
    retrieval.kk
    ...
    """

    model_config = SettingsConfigDict(env_prefix="DOCPIPE_", env_nested_delimiter="__", extra="forbid")

    home: Path | None = Field(
        None, description="Store root (documents, indexes). Default: DOCPIPE_HOME or the user cache dir."
    )
    extraction: ExtractionSettings = Field(
        default_factory=ExtractionSettings, description="PDF to text: extractor, time and memory bounds."
    )
    chunking: ChunkingSettings = Field(
        default_factory=ChunkingSettings, description="Sections and passages: sizes in tokens."
    )
    embedding: EmbeddingSettings = Field(default_factory=EmbeddingSettings, description="The passage embedder.")
    retrieval: RetrievalSettings = Field(
        default_factory=RetrievalSettings, description="Ranking and the context budget."
    )
    engine: EngineSettings = Field(default_factory=EngineSettings, description="How answers are produced.")
    analysis: AnalysisSettings = Field(
        default_factory=AnalysisSettings, description="The contract-analysis checklist: budget, references."
    )
    review: ReviewSettings = Field(
        default_factory=ReviewSettings, description="Review grids: prompt layout and the engine stream."
    )
    ray: RaySettings = Field(
        default_factory=RaySettings, description="The Ray executor: cluster address and stage sizes."
    )
    cache_url: str | None = Field(
        None,
        description="Answer cache: empty = SQLite under the store; sqlite:///path; redis://host:port/0; 'none'. "
        "From the environment: DOCPIPE_CACHE_URL (an argument wins over it).",
    )
    cache_ttl_s: float = Field(30 * 86400, gt=0, description="How long a cached answer stays valid, in seconds.")
    audit_key_file: Path | None = Field(
        None,
        description="The access log's secret (64 hex digits, mode 600), which signs its lines and checkpoint and "
        "keys its question hashes; made on first use. Default: <store>/access/audit.key. Put it where the "
        "store's other writers cannot reach it. From the environment: DOCPIPE_AUDIT_KEY_FILE. See "
        "docs/access-log.md.",
    )
    store_key_file: Path | None = Field(
        None,
        description="Encryption at rest: a file (mode 600) holding the store key, 64 hex digits (docpipe keys "
        "store-key --out FILE). Documents, indexes, cached answers and the server's records are then sealed "
        "with AES-256-GCM. From the environment: DOCPIPE_STORE_KEY_FILE. See docs/encryption-at-rest.md.",
    )
    store_key: SecretStr | None = Field(
        None,
        # Never dumped: settings travel as JSON (Ray workers, config show), and a worker reads its own variable.
        exclude=True,
        description="Encryption at rest: the store key itself (64 hex digits or base64 of 32 bytes), for "
        "deployments that pass secrets as variables: DOCPIPE_STORE_KEY. Set this or store_key_file, not both.",
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Earlier sources win: arguments, then the environment, then the config file.
        return init_settings, env_settings, _ConfigFileSource(settings_cls)

    @classmethod
    def preset(cls, name: str, *, config_file: str | os.PathLike[str] | None = None, **overrides: Any) -> Settings:
        """Returns the settings of a named preset (see `PRESETS`), with overrides applied; `config_file` as in
        `load_settings`."""
        if name not in PRESETS:
            raise ConfigError(f"unknown preset {name!r}: choose one of {', '.join(sorted(PRESETS))}")
        return load_settings(config_file=config_file, **merge_settings(PRESETS[name], overrides))

    def store_root(self) -> Path:
        """Returns the store directory: `home`, else ``$DOCPIPE_HOME``, else the user cache dir."""
        return self.home if self.home is not None else default_home()

    def extractive_floor(self) -> float | None:
        """Returns the clause score below which an offline answer says "nothing found": as set, else the
        floor measured for the default embedder, else None (scores of another embedder were not measured).

        >>> Settings().extractive_floor(), Settings(embedding={"model": "hashing"}).extractive_floor()
        (2.6, None)
        """
        if self.engine.extractive_min_score is not None:
            return self.engine.extractive_min_score
        return EXTRACTIVE_MIN_SCORE if self.embedding.model == DEFAULT_EMBEDDER else None

    def index_fingerprint(self) -> str:
        """Returns a short hash of every setting that changes what ingestion produces."""
        relevant = {
            "extraction": self.extraction.extractor,
            "chunking": self.chunking.model_dump(),
            "embedding": self.embedding.model,
            # Bump when extraction, sectioning or passage logic changes what an index holds.
            "format": INDEX_FORMAT,
        }
        if self.embedding.vector_backend() == "openvino":
            # Its vectors are not torch's to float32 rounding (bfloat16): never mix them in one index entry.
            relevant["embedding_backend"] = "openvino"
        if self.retrieval.index_type != "auto":
            # A forced index type is stored with the index; "auto" stays out so existing stores stay valid.
            relevant["index_type"] = self.retrieval.index_type
        # A local model folder is known by name only: its files' digest keys the index, so other weights or
        # another vocabulary under the same folder name build a new index instead of reusing the old one.
        # (The packaged embedder and tokenizer are checked against recorded SHA-256 when they load.)
        for key, spec in (("embedding_files", self.embedding.model), ("tokenizer_files", self.chunking.tokenizer)):
            folder = Path(spec).expanduser()
            if folder.is_dir():
                relevant[key] = folder_digest(folder)
        ocr = self.extraction.ocr_in_effect()
        if ocr is not None:
            # Pages without a text layer get text: a document indexed without OCR (off, or no engine installed
            # then) is indexed again once OCR can read it. Without OCR the text is what it always was, so
            # indexes made before OCR existed stay valid.
            relevant["ocr"] = ocr
        return hashlib.sha256(json.dumps(relevant, sort_keys=True).encode()).hexdigest()[:16]

    def settings_fingerprint(self) -> str:
        """Returns a short hash of every setting that can change an answer or a report (not paths or secrets)."""
        # The store key seals files at rest; it never changes an answer.
        exclude = {"home", "cache_url", "cache_ttl_s", "ray", "store_key_file", "audit_key_file"}
        data = self.model_dump(mode="json", exclude=exclude)
        data["engine"].pop("api_key", None)
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


INDEX_FORMAT = 6  # 6: sub-clauses are sections, headings titles not sentences; routing cards name the parties

PRESETS: dict[str, dict[str, Any]] = {
    "default": {},
    "cpu-demo": {"extraction": {"extractor": "pypdfium2"}},
    "fast": {"extraction": {"extractor": "pypdfium2"}},
    "test": {"embedding": {"model": "hashing"}},
}


def merge_settings(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """Returns `base` with `overrides` laid over it, nested dicts merged key by key (neither is changed).

    >>> merge_settings({"engine": {"backend": "echo"}}, {"engine": {"model": "m"}, "home": "/tmp/x"})
    {'engine': {'backend': 'echo', 'model': 'm'}, 'home': '/tmp/x'}
    """
    merged: dict[str, Any] = json.loads(json.dumps(base))
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge_settings(merged[key], value)
        else:
            merged[key] = value
    return merged


def load_settings(*, config_file: str | os.PathLike[str] | None = None, **data: Any) -> Settings:
    """Returns `Settings` from arguments, ``DOCPIPE_*`` variables and the config file (`config_file`, else
    `config_file_path()`); a bad value is a `ConfigError` that names the setting, its environment variable and
    what is wrong."""
    from pydantic import ValidationError

    token = _CONFIG_FILE.set(Path(config_file).expanduser() if config_file is not None else None)
    try:
        return Settings(**data)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            path = [str(part) for part in error["loc"]]
            variable = "DOCPIPE_" + "__".join(path).upper()
            message = error["msg"]
            if error["type"] == "extra_forbidden":
                message = f"no such setting: check its spelling ({_known(path[:-1])})"
            problems.append(f"{'.'.join(path)} (env {variable}): {message}")
        where = config_file_path()
        source = f" (a value may come from the config file {where})" if where is not None else ""
        raise ConfigError("invalid setting: " + "; ".join(problems) + source) from None
    finally:
        _CONFIG_FILE.reset(token)


def config_file_path() -> Path | None:
    """Returns the config file settings are read from: the one `load_settings` was given, else
    ``$DOCPIPE_CONFIG``, else the user config dir's ``docpipe/config.toml`` when it exists; None without one."""
    given = _CONFIG_FILE.get()
    if given is not None:
        return given
    if os.environ.get(CONFIG_ENV):
        return Path(os.environ[CONFIG_ENV]).expanduser()
    from platformdirs import user_config_dir

    default = Path(user_config_dir("docpipe")) / "config.toml"
    return default if default.is_file() else None


def read_config_file(path: Path) -> dict[str, Any]:
    """Returns the settings in the TOML file `path`; a `ConfigError` naming the file when it is missing, is not
    TOML, or holds a key that is no setting (nested tables included)."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(
            f"the config file {path} does not exist: create it, or fix --config / ${CONFIG_ENV}"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the config file {path}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"the config file {path} is not valid TOML: {exc}") from None
    unknown = _unknown_keys(Settings, data, [])
    if unknown:
        raise ConfigError(
            f"the config file {path} has keys that are no setting: {', '.join(unknown)} "
            f"(check their spelling; {_known([])} and the tables' fields in docpipe/settings.py)"
        )
    return data


def _unknown_keys(model: type[BaseModel], data: dict[str, Any], parent: list[str]) -> list[str]:
    # Old names kept as aliases (extractive_sentences) count as known, as they do for arguments.
    names: dict[str, FieldInfo] = {}
    for name, field in model.model_fields.items():
        names[name] = field
        if isinstance(field.validation_alias, AliasChoices):
            names.update({alias: field for alias in field.validation_alias.choices if isinstance(alias, str)})
    unknown = []
    for key, value in data.items():
        if key not in names:
            unknown.append(".".join([*parent, key]))
            continue
        annotation = names[key].annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel) and isinstance(value, dict):
            unknown += _unknown_keys(annotation, value, [*parent, key])
    return unknown


class _ConfigFileSource(PydanticBaseSettingsSource):
    """The config file as a pydantic-settings source, below the environment."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        # Unused: __call__ hands over the whole file at once.
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        path = config_file_path()
        return read_config_file(path) if path is not None else {}


def _known(parent: list[str]) -> str:
    model: type[BaseModel] = Settings
    for part in parent:
        annotation = model.model_fields[part].annotation if part in model.model_fields else None
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return "see docpipe.settings"
        model = annotation
    return "known: " + ", ".join(model.model_fields)


def default_home() -> Path:
    """Returns ``$DOCPIPE_HOME`` if set, else the platform's user cache dir for docpipe."""
    env = os.environ.get("DOCPIPE_HOME")
    if env:
        return Path(env).expanduser()
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("docpipe"))
