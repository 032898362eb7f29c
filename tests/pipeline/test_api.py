"""The public API as a contract: the exported names, a cheap `import docpipe`, the error tree, the settings
object, and the argument errors of `DocPipe`."""

from __future__ import annotations

import dataclasses
import enum
import inspect
import json
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError

import docpipe
from docpipe import (
    ConfigError,
    DependencyError,
    DocPipe,
    DocpipeError,
    EmptyFileError,
    ExtractionError,
    ExtractionTimeoutError,
    FileMissingError,
    InputError,
    MalformedPDFError,
    ModelFilesMismatchError,
    NotAPDFError,
    NoTextError,
    PasswordRequiredError,
    Settings,
    StoreError,
    WrongPasswordError,
)
from docpipe import errors as errors_module
from docpipe.settings import PRESETS, load_settings, merge_settings

PUBLIC_API = [
    "AccessLog",
    "AddProgress",
    "AddReport",
    "Answer",
    "AnswerEvent",
    "AuditManifest",
    "BusyError",
    "CHECKLIST",
    "Category",
    "CategoryFinding",
    "Citation",
    "Collection",
    "ConfigError",
    "ContractReport",
    "DependencyError",
    "DocPipe",
    "DocpipeError",
    "Document",
    "EchoEngine",
    "EmptyFileError",
    "EncryptedWordFileError",
    "EncryptionCheckError",
    "Engine",
    "EngineError",
    "EngineUnavailableError",
    "ExtractionError",
    "ExtractionTimeoutError",
    "FileMissingError",
    "GenerationRequest",
    "GenerationResult",
    "HashingEmbedder",
    "Hit",
    "InputError",
    "KeyStore",
    "MalformedPDFError",
    "MatterDocument",
    "MatterStore",
    "Member",
    "ModelFilesMismatchError",
    "NoTextError",
    "NotAPDFError",
    "Page",
    "PageStatus",
    "Passage",
    "PasswordRequiredError",
    "Principal",
    "ReviewCancelled",
    "ReviewGrid",
    "ReviewProgress",
    "SealedDataError",
    "Section",
    "Settings",
    "StoreError",
    "StoreKeyError",
    "TooMuchTextError",
    "WrongPasswordError",
    "__version__",
]

# None of these is imported by `import docpipe`: they load when first used.
NOT_IMPORTED = [
    "torch",
    "faiss",
    "sentence_transformers",
    "vllm",
    "gradio",
    "transformers",
    "pypdf",
    "pypdfium2",
    "numpy",
]

ERRORS = [getattr(errors_module, name) for name in errors_module.__all__]
QUESTION = "What is the notice period for termination for convenience?"


# -- exported names ----------------------------------------------------------------------------


def test_public_api_is_pinned() -> None:
    assert sorted(docpipe.__all__) == PUBLIC_API
    assert len(set(docpipe.__all__)) == len(docpipe.__all__)


@pytest.mark.parametrize("name", PUBLIC_API)
def test_public_name_is_importable_and_documented(name: str) -> None:
    namespace: dict[str, object] = {}
    exec(f"from docpipe import {name}", namespace)
    obj = namespace[name]
    if name == "__version__":
        assert isinstance(obj, str) and obj
        return
    if name == "CHECKLIST":
        assert isinstance(obj, tuple) and len(obj) == 41 and all(isinstance(c, docpipe.Category) for c in obj)
        return
    assert inspect.isclass(obj) or inspect.isfunction(obj), name
    # Its own docstring: not inherited, not the signature dataclasses write when there is none.
    doc = obj.__dict__.get("__doc__") if inspect.isclass(obj) else obj.__doc__
    assert doc and doc.strip(), f"{name} has no docstring"
    if inspect.isclass(obj) and dataclasses.is_dataclass(obj):
        assert not doc.startswith(f"{name}("), f"{name} only has the generated dataclass docstring"
    if inspect.isclass(obj) and issubclass(obj, enum.Enum):
        assert doc != enum.Enum.__doc__


def test_import_docpipe_is_cheap() -> None:
    code = "import json, sys, docpipe; print(json.dumps(sorted(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    loaded = {name.split(".")[0] for name in json.loads(result.stdout)}
    assert "docpipe" in loaded
    assert loaded.isdisjoint(NOT_IMPORTED), sorted(loaded & set(NOT_IMPORTED))


# -- errors ------------------------------------------------------------------------------------


def test_errors_module_exports_every_error_class() -> None:
    assert {e.__name__ for e in ERRORS} == {n for n in PUBLIC_API if n.endswith("Error")}


@pytest.mark.parametrize("error", ERRORS, ids=lambda e: e.__name__)
def test_every_error_derives_from_docpipe_error(error: type[Exception]) -> None:
    assert issubclass(error, DocpipeError)
    assert error.__name__ in (errors_module.__doc__ or ""), "the tree in errors.py's docstring must show it"


@pytest.mark.parametrize(
    ("error", "builtin"),
    [
        (ConfigError, ValueError),
        (InputError, ValueError),
        (FileMissingError, FileNotFoundError),
        (FileMissingError, InputError),
        (EmptyFileError, InputError),
        (NotAPDFError, InputError),
        (PasswordRequiredError, ExtractionError),
        (WrongPasswordError, ExtractionError),
        (MalformedPDFError, ExtractionError),
        (NoTextError, ExtractionError),
        (ExtractionTimeoutError, ExtractionError),
        (ExtractionTimeoutError, TimeoutError),
        (DependencyError, ImportError),
        (ModelFilesMismatchError, DependencyError),
        (StoreError, OSError),
    ],
    ids=lambda t: t.__name__,
)
def test_error_tree(error: type[Exception], builtin: type[Exception]) -> None:
    assert issubclass(error, builtin)


def test_error_context_becomes_attributes() -> None:
    exc = ExtractionTimeoutError("took too long: use --extractor pypdfium2", path="a.pdf", page=7, extractor="pypdf")
    assert str(exc) == "took too long: use --extractor pypdfium2"
    assert exc.message == str(exc)
    assert (exc.path, exc.page, exc.extractor) == ("a.pdf", 7, "pypdf")
    assert exc.context == {"path": "a.pdf", "page": 7, "extractor": "pypdf"}
    with pytest.raises(TimeoutError):
        raise exc
    with pytest.raises(FileNotFoundError) as caught:
        raise FileMissingError("no such file: x.pdf", path="x.pdf")
    assert caught.value.path == "x.pdf"


# -- settings ----------------------------------------------------------------------------------


def test_settings_read_prefixed_nested_env_vars(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DOCPIPE_RETRIEVAL__K", "7")
    monkeypatch.setenv("DOCPIPE_RETRIEVAL__HYBRID", "false")
    monkeypatch.setenv("DOCPIPE_EXTRACTION__EXTRACTOR", "pypdfium2")
    monkeypatch.setenv("DOCPIPE_CHUNKING__MAX_SECTION_TOKENS", "2048")
    settings = Settings(home=tmp_path)
    assert settings.retrieval.k == 7
    assert settings.retrieval.hybrid is False
    assert settings.extraction.extractor == "pypdfium2"
    assert settings.chunking.max_section_tokens == 2048
    assert settings.retrieval.budget_tokens == 16384, "fields not set in the environment keep their defaults"
    assert Settings.preset("test", home=tmp_path).retrieval.k == 7, "presets read the environment too"
    monkeypatch.delenv("DOCPIPE_EXTRACTION__EXTRACTOR")
    assert Settings(home=tmp_path).index_fingerprint() != settings.index_fingerprint()


def test_invalid_setting_is_a_value_error(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError):
        Settings(retrieval={"k": 0})
    monkeypatch.setenv("DOCPIPE_EXTRACTION__EXTRACTOR", "tesseract")
    with pytest.raises(ValueError):
        Settings()


NESTED_SECTIONS = ["extraction", "chunking", "embedding", "retrieval", "engine", "analysis", "review"]


@pytest.mark.parametrize("section", NESTED_SECTIONS)
def test_unknown_nested_key_is_an_error_that_names_it(section: str) -> None:
    with pytest.raises(ValidationError, match=rf"{section}\.kk"):
        Settings(**{section: {"kk": 2}})
    with pytest.raises(ConfigError) as caught:
        load_settings(**{section: {"kk": 2}})
    message = str(caught.value)
    assert f"{section}.kk" in message and f"DOCPIPE_{section.upper()}__KK" in message
    assert "no such setting" in message and next(iter(type(getattr(Settings(), section)).model_fields)) in message


def test_unknown_nested_env_var_is_an_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # Variables of other parts of docpipe (no "__" into a settings section) are not settings: left alone.
    monkeypatch.setenv("DOCPIPE_SERVE_TOKEN", "x" * 24)
    monkeypatch.setenv("DOCPIPE_UI_AUTH", "alice:s3cret")
    assert load_settings(home=tmp_path).retrieval.k == 4
    monkeypatch.setenv("DOCPIPE_RETRIEVAL__KK", "2")  # a typo of DOCPIPE_RETRIEVAL__K
    with pytest.raises(ConfigError, match="DOCPIPE_RETRIEVAL__KK.*no such setting"):
        load_settings(home=tmp_path)


def test_cache_url_comes_from_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert Settings(home=tmp_path).cache_url is None
    monkeypatch.setenv("DOCPIPE_CACHE_URL", "none")
    assert Settings(home=tmp_path).cache_url == "none"
    assert Settings.preset("test", home=tmp_path).cache_url == "none"
    assert Settings(home=tmp_path, cache_url="sqlite:///x.db").cache_url == "sqlite:///x.db", "an argument wins"


def test_preset_overrides_merge_with_the_preset_and_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("DOCPIPE_ENGINE__MODEL", "from-env")
    settings = Settings.preset("test", home=tmp_path, engine={"backend": "echo"})
    assert (settings.engine.backend, settings.engine.model, settings.embedding.model) == ("echo", "from-env", "hashing")
    base = {"engine": {"backend": "echo", "engine_kwargs": {"a": 1}}}
    merged = merge_settings(base, {"engine": {"engine_kwargs": {"b": 2}}})
    assert merged == {"engine": {"backend": "echo", "engine_kwargs": {"a": 1, "b": 2}}}
    assert base == {"engine": {"backend": "echo", "engine_kwargs": {"a": 1}}}, "the preset itself is not changed"


def test_presets() -> None:
    assert {"default", "cpu-demo", "fast", "test"} <= set(PRESETS)
    for name in PRESETS:
        assert isinstance(Settings.preset(name), Settings)
    assert Settings.preset("test").embedding.model == "hashing"
    assert Settings.preset("default") == Settings()
    assert Settings.preset("fast").extraction.extractor == "pypdfium2"
    assert Settings.preset("test", retrieval={"k": 2}).retrieval.k == 2
    assert Settings.preset("test", retrieval={"k": 2}).embedding.model == "hashing"


def test_unknown_preset_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as caught:
        Settings.preset("nope")
    assert isinstance(caught.value, ValueError)
    message = str(caught.value)
    assert "'nope'" in message
    for name in ("default", "cpu-demo", "fast", "test"):
        assert name in message


def test_every_settings_field_has_a_description() -> None:
    nested = {
        name: field.annotation
        for name, field in Settings.model_fields.items()
        if inspect.isclass(field.annotation) and issubclass(field.annotation, BaseModel)
    }
    assert set(nested) == {"extraction", "chunking", "embedding", "retrieval", "engine", "analysis", "review", "ray"}
    for name, field in Settings.model_fields.items():
        assert field.description and field.description.strip(), f"{name} has no description"
    for section, model in nested.items():
        for name, field in model.model_fields.items():
            assert field.description and field.description.strip(), f"{section}.{name} has no description"


# -- DocPipe arguments -------------------------------------------------------------------------


@pytest.fixture
def ingested(test_pipe: DocPipe, sample_pdf: Path):
    return test_pipe, test_pipe.ingest(sample_pdf)


@pytest.mark.parametrize("k", [0, -1])
def test_search_with_k_below_one_is_a_config_error(ingested, k: int) -> None:
    dp, doc = ingested
    with pytest.raises(ConfigError, match="k must be at least 1"):
        dp.search(doc, QUESTION, k=k)
    assert len(dp.search(doc, QUESTION, k=1)) == 1


@pytest.mark.parametrize("question", ["", "   ", "\n\t"])
def test_empty_question_is_a_config_error(ingested, question: str) -> None:
    dp, doc = ingested
    for method in (dp.search, dp.rank, dp.context, dp.ask):
        with pytest.raises(ConfigError, match="question is empty"):
            method(doc, question)


@pytest.mark.parametrize("source", [123, None, 1.5, ["a.pdf"], {"path": "a.pdf"}])
def test_ingest_of_something_else_says_what_to_pass(test_pipe: DocPipe, source: object) -> None:
    with pytest.raises(InputError) as caught:
        test_pipe.ingest(source)  # type: ignore[arg-type]
    message = str(caught.value)
    assert type(source).__name__ in message
    assert "file path" in message and "bytes" in message


def test_ingest_of_a_missing_path_is_file_not_found(test_pipe: DocPipe, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError) as caught:
        test_pipe.ingest(tmp_path / "nope.pdf")
    assert isinstance(caught.value, FileMissingError)
    assert caught.value.path == str(tmp_path / "nope.pdf")


@pytest.mark.parametrize("budget", [0, -5])
def test_search_with_a_budget_below_one_is_a_config_error(ingested, budget: int) -> None:
    dp, doc = ingested
    with pytest.raises(ConfigError):
        dp.search(doc, QUESTION, budget_tokens=budget)
