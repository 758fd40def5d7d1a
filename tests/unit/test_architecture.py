"""The shape of the house, checked: the stage list is a real contract, and imports go one way.

Import checks read the source (ast), so they see lazy imports inside functions too.
"""

from __future__ import annotations

import ast
import inspect
import itertools
import subprocess
import sys
import textwrap
import typing
from pathlib import Path
from typing import Any

import pytest

from memwrite.config.environment import LambdaEnvironment
from memwrite.errors import ConfigError
from memwrite.payloads import OutboxChange
from memwrite.ports import StageAdapters
from memwrite.schema import TABLES, Access, SearchAccess
from memwrite.stages import STAGES, StageDef, StagePlacement, pipeline_stages, stream_stages

REPO = Path(__file__).resolve().parents[2]
LIBRARY = REPO / "layers" / "core" / "memwrite"
# Only adapters talk to the outside world.
OUTSIDE_WORLD = {"boto3", "botocore", "moto", "anthropic", "opensearchpy", "faiss", "sqlite3"}


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def library_files() -> list[Path]:
    return sorted(LIBRARY.rglob("*.py"))


@pytest.mark.parametrize("stage", [*pipeline_stages(), *stream_stages()], ids=lambda s: s.name)
def test_every_pipeline_and_stream_stage_runs_with_the_models_the_list_names(
    stage: object,
) -> None:
    from memwrite.stages import StageDef

    assert isinstance(stage, StageDef)
    hints = typing.get_type_hints(stage.run)
    params = list(hints)
    assert params[:2] == ["payload", "config"], "run(payload, config, deps) -> payload"
    assert hints["payload"] is stage.input_model
    assert hints["return"] is stage.output_model
    assert (REPO / "functions" / stage.function_dir / "handler.py").is_file()


def test_each_stage_output_is_the_next_stage_input() -> None:
    stages = pipeline_stages()
    for before, after in itertools.pairwise(stages):
        assert before.output_model is after.input_model, (before.name, after.name)


def test_stream_stages_follow_the_pipeline_one_outbox_row_at_a_time() -> None:
    # The outbox consumer is last, and its `run` takes one row (its batches fail row by row)
    placements = [stage.placement for stage in STAGES]
    assert placements.index(StagePlacement.STREAM) > max(
        i for i, p in enumerate(placements) if p is StagePlacement.PIPELINE
    )
    assert [stage.name for stage in stream_stages()] == ["hype"]
    assert all(stage.input_model is OutboxChange for stage in stream_stages())


def test_every_stage_has_its_own_handler_folder_and_library_module() -> None:
    assert len({s.function_dir for s in STAGES}) == len(STAGES)
    assert len({s.module for s in STAGES}) == len(STAGES)
    for stage in STAGES:
        assert (LIBRARY / stage.name / "stage.py").is_file(), stage.module
        assert callable(stage.run), stage.name
    assert STAGES[0].placement is StagePlacement.INGEST


def stages_served(handler: Path) -> set[str]:
    """The stages a handler module serves: those whose package it imports, or that it names to
    `stage_handler` / `stage_named`."""
    names = {stage.name for stage in STAGES}
    served = {
        module.split(".")[1]
        for module in imported_modules(handler)
        if module.startswith("memwrite.") and module.split(".")[1] in names
    }
    for node in ast.walk(ast.parse(handler.read_text(encoding="utf-8"))):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in {"stage_handler", "stage_named"}
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            served.add(str(node.args[0].value))
    return served


def test_a_stage_has_one_name_for_its_package_and_its_lambda() -> None:
    # Given every Lambda handler of functions/
    handlers = sorted((REPO / "functions").glob("*/handler.py"))
    # Then each stage's Lambda folder bears the stage's name (`memwrite.<name>`, functions/<name>/)
    for stage in STAGES:
        assert stage.function_dir == stage.name
        assert REPO / "functions" / stage.name / "handler.py" in handlers, stage.name
    # And a handler that serves a stage lives in that stage's folder, under no other name
    for handler in handlers:
        assert stages_served(handler) <= {handler.parent.name}, handler.parent.name


def test_each_stage_has_one_docs_page_named_by_it_and_no_page_is_not_a_stage() -> None:
    pages = {page.stem for page in (REPO / "docs" / "stages").glob("*.md")}
    assert pages == {stage.name for stage in STAGES}


# Prompt modules not named by a stage, by the stage whose part calls them.
PROMPTS_OF_A_STAGE_PART = {"verify": "extract"}  # extract's verifier (`extract/verifier.py`)


def test_each_prompt_module_is_named_by_the_stage_that_asks_it() -> None:
    prompts = {path.stem for path in (LIBRARY / "prompts").glob("*.py")} - {"__init__"}
    names = {stage.name for stage in STAGES}
    assert prompts - names == PROMPTS_OF_A_STAGE_PART.keys()
    assert set(PROMPTS_OF_A_STAGE_PART.values()) <= names


# What a builder asks the adapters for, by the fact its stage must declare for it.
MODEL_CLIENTS = {"extraction_llm", "verifier", "resolve_judge", "dedupe_judge", "questions"}


def adapters_asked(builder: Any) -> set[str]:
    """The `adapters` members a `build_deps` uses."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(builder)))
    return {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "adapters"
    }


def events_emitted(stage: StageDef) -> set[str]:
    """The event names the stage's package passes to `metrics.event(stage, name, ...)`."""
    found = set()
    for path in (LIBRARY / stage.name).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "event"
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
            ):
                found.add(node.args[1].value)
    return found


def raises_budget_wait(stage: StageDef) -> bool:
    """Whether the stage's package raises `BudgetWait(...)` (the state machine waits it)."""
    return any(
        isinstance(node, ast.Raise)
        and isinstance(node.exc, ast.Call)
        and isinstance(node.exc.func, ast.Name)
        and node.exc.func.id == "BudgetWait"
        for path in (LIBRARY / stage.name).rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
    )


@pytest.mark.parametrize("stage", STAGES, ids=lambda s: s.name)
def test_every_stage_declares_its_facts_and_the_code_matches_them(stage: StageDef) -> None:
    # Given a stage of the list / When its builder is resolved
    builder = stage.build_deps
    hints = typing.get_type_hints(builder, localns={"StageAdapters": StageAdapters})
    # Then it takes the adapters bundle and returns what the entry point takes
    assert hints["adapters"] is StageAdapters
    assert hints["return"] is typing.get_type_hints(stage.run)["deps"]
    # And its table access names schema tables only (the grants are exactly these)
    assert stage.tables, "a stage declares the tables it reads and writes"
    assert set(stage.tables) <= {t.logical_name for t in TABLES}
    assert all(isinstance(access, Access) for access in stage.tables.values())
    # And the builder asks for a model, the embedder, the index only when the stage says so
    asked = adapters_asked(builder)
    assert bool(asked & MODEL_CLIENTS) == stage.calls_model
    assert ("embedder" in asked) == stage.calls_embedder
    assert ("search_index" in asked) == (stage.search is not None)
    assert stage.search is None or isinstance(stage.search, SearchAccess)
    # And the malformed-answer metrics it declares are the ones its code emits
    malformed = {name for name in events_emitted(stage) if name.endswith("_json_fail")}
    assert malformed == set(stage.malformed_metrics)
    assert not stage.malformed_metrics or stage.calls_model
    # And it says it waits for the model budget exactly when its code raises BudgetWait
    assert raises_budget_wait(stage) == stage.waits_for_budget
    assert not stage.waits_for_budget or stage.calls_model


def test_outside_adapters_the_library_imports_no_sdk_or_engine() -> None:
    offenders = {
        f"{path.relative_to(LIBRARY)}: {module}"
        for path in library_files()
        if "adapters" not in path.parts
        for module in imported_modules(path)
        if module.split(".")[0] in OUTSIDE_WORLD
    }
    assert offenders == set()


def test_the_library_never_imports_handlers_or_local_tooling() -> None:
    offenders = set()
    for path in library_files():
        text = path.read_text(encoding="utf-8")
        for module in imported_modules(path):
            if module.split(".")[0] in {"functions", "memwrite_local", "tests"}:
                offenders.add(f"{path.name}: {module}")
        # Not even by string (importlib.import_module("functions...")).
        if '"functions.' in text or "'functions." in text:
            offenders.add(f"{path.name}: names functions.* in a string")
    assert offenders == set()


def library_module(path: Path) -> str:
    parts = path.relative_to(LIBRARY.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def library_imports(path: Path) -> set[str]:
    """The library modules `path` imports (type-checking imports included: a loop is a loop)."""
    known = {library_module(p) for p in library_files()}
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
            found.update(name for name in [node.module, *names] if name in known)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in known)
    return found - {"memwrite", library_module(path)}


def test_the_library_has_no_import_loops() -> None:
    graph = {library_module(p): library_imports(p) for p in library_files()}
    loops: list[list[str]] = []

    def visit(module: str, path: list[str], done: set[str]) -> None:
        for imported in sorted(graph.get(module, ())):
            if imported in path:
                loops.append([*path[path.index(imported) :], imported])
            elif imported not in done:
                visit(imported, [*path, imported], done)
        done.add(module)

    done: set[str] = set()
    for module in sorted(graph):
        if module not in done:
            visit(module, [module], done)
    assert loops == []


def imported_names(path: Path) -> set[str]:
    """Every dotted name `path` imports, lazy and type-checking imports included: the module of
    each `from` import and each name taken from it (`from memwrite.dedupe import stage`)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def stage_modules_imported(path: Path) -> set[str]:
    """The stages whose `stage` module `path` imports."""
    names = imported_names(path)
    return {
        stage.name
        for stage in STAGES
        if any(name == stage.module or name.startswith(f"{stage.module}.") for name in names)
    }


def test_no_stage_imports_another_stages_stage_module() -> None:
    # Given each stage's package / When its imports are read
    offenders = {
        f"{path.relative_to(LIBRARY)}: {other}.stage"
        for stage in STAGES
        for path in sorted((LIBRARY / stage.name).rglob("*.py"))
        for other in stage_modules_imported(path) - {stage.name}
    }
    # Then none names another stage's entry-point module: what two stages share lives in a
    # module neither owns (`memwrite.decisions`, the domain at the root)
    assert offenders == set()


def test_a_stage_module_is_reached_through_the_stage_list() -> None:
    # The rule: a stage's `stage` module is loaded through `memwrite.stages.STAGES`
    # (`StageDef.run` and `.build_deps` import it by name). Besides its own package, only its
    # own Lambda handler (`functions/<function_dir>/`) and `memwrite/wiring/` (which builds
    # and types what the handlers get) import it. Tests may import any stage module.
    allowed = {path: {s.name for s in STAGES} for path in sorted((LIBRARY / "wiring").glob("*.py"))}
    code = [
        *(
            path
            for path in library_files()
            if path.relative_to(LIBRARY).parts[0] not in {s.name for s in STAGES}
        ),
        *sorted((REPO / "functions").rglob("*.py")),
        *sorted((REPO / "memwrite_local").rglob("*.py")),
    ]
    offenders = set()
    for path in code:
        own = {s.name for s in STAGES if (REPO / "functions" / s.function_dir) in path.parents}
        for stage in stage_modules_imported(path) - own - allowed.get(path, set()):
            offenders.add(f"{path.relative_to(REPO)}: {stage}.stage")
    assert offenders == set()


# The library's layers, lowest first: a module imports from its own layer and those below it,
# never from one above (type-checking imports included: a type is a dependency too). Every
# root-level module but wiring is the shared domain; every package is placed here by name, so
# a new one is placed on purpose.
DOMAIN_PACKAGES = {
    "claims",
    "config",
    "costs",
    "guards",
    "records",
    "topics",
    "prompts",
    "direct_memories",
    "budget",
    "metering",
}  # records, rules the ports name
SHARED_PACKAGES = {"decisions"}  # what more than one stage decides (dedupe, conflict, persist)
FEATURE_PACKAGES = {stage.name for stage in STAGES} | {
    "auth",
    "backfill",
    "client",
    "edit",
    "execution",
    "expiry",
    "feed",
    "integrations",
    "mcp_server",
    "portability",
    "read",
    "replay",
    "tenants",
}
LAYERS = ("domain", "shared", "features", "wiring")
# Beside the layers: the adapters implement the ports, import the domain only, and only wiring
# picks them.
ADAPTERS = "adapters"


def layer_of(module: str) -> str:
    """The layer of a library module (`memwrite.<top>...`). A package's own `ports` module
    (the Protocols of a capability, `memwrite.backfill.ports`) is domain, as `memwrite.ports`
    is: adapters implement it."""
    top = module.split(".")[1] if "." in module else ""
    if module.split(".")[2:] == ["ports"]:
        return "domain"
    if top in {"wiring", ADAPTERS}:
        return top
    if not top or not (LIBRARY / top).is_dir() or top in DOMAIN_PACKAGES:
        return "domain"
    if top in SHARED_PACKAGES:
        return "shared"
    if top in FEATURE_PACKAGES:
        return "features"
    raise AssertionError(f"memwrite.{top} is in no layer: place it in test_architecture.py")


def test_every_package_of_the_library_has_a_layer() -> None:
    packages = {p.parent.name for p in LIBRARY.glob("*/__init__.py")}
    placed = DOMAIN_PACKAGES | SHARED_PACKAGES | FEATURE_PACKAGES | {ADAPTERS, "wiring"}
    assert packages == placed


def test_no_import_runs_back_up_a_layer() -> None:
    # Given every import between library modules, lazy and type-checking ones included
    offenders = set()
    for path in library_files():
        importer = layer_of(library_module(path))
        for imported in library_imports(path):
            layer = layer_of(imported)
            if importer == ADAPTERS:
                # Then an adapter takes the domain (ports, records) and other adapters only
                wrong = layer not in {"domain", ADAPTERS}
            elif layer == ADAPTERS:
                # And only wiring picks an adapter
                wrong = importer != "wiring"
            else:
                # And everything else imports its own layer or a lower one
                wrong = LAYERS.index(layer) > LAYERS.index(importer)
            if wrong:
                offenders.add(f"{path.relative_to(LIBRARY)} ({importer}) -> {imported} ({layer})")
    assert offenders == set()


def test_every_protocol_lives_in_ports() -> None:
    elsewhere = {
        f"{path.relative_to(LIBRARY)}: {node.name}"
        for path in library_files()
        if path.name not in {"ports.py", "model_ports.py"}
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ClassDef)
        and any(isinstance(b, ast.Name) and b.id == "Protocol" for b in node.bases)
    }
    assert elsewhere == set()


def test_every_exception_lives_in_errors() -> None:
    elsewhere = {
        f"{path.relative_to(LIBRARY)}: {node.name}"
        for path in library_files()
        if path.name != "errors.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ClassDef)
        and any(
            isinstance(b, ast.Name) and (b.id.endswith("Error") or b.id == "Exception")
            for b in node.bases
        )
    }
    assert elsewhere == set()


def test_the_pre_filter_lambda_loads_no_later_stage() -> None:
    # Given a fresh interpreter / When the pre_filter handler and the stage list are imported
    code = (
        "import sys, functions.pre_filter.handler, memwrite.stages; "
        "print(','.join(sorted(m for m in sys.modules if m.startswith('memwrite.'))))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO
    ).stdout.strip()
    # Then no module of a pipeline stage (nor numpy behind dedupe) came with them
    modules = set(loaded.split(","))
    later = {s.package for s in (*pipeline_stages(), *stream_stages())}
    assert {m for m in modules if any(m == p or m.startswith(f"{p}.") for p in later)} == set()


def full_environment() -> dict[str, str]:
    env = {f"{t.logical_name.upper()}_TABLE": f"memwrite-{t.logical_name}" for t in TABLES}
    return {**env, "TURN_QUEUE_URL": "https://sqs.example/q"}


def test_the_lambda_environment_names_a_variable_for_every_table() -> None:
    loaded = LambdaEnvironment.load(full_environment())
    assert loaded.memories_table == "memwrite-memories"
    assert loaded.queue_url() == "https://sqs.example/q"


def test_a_missing_variable_fails_at_cold_start_naming_it() -> None:
    env = full_environment()
    del env["OUTBOX_TABLE"]
    with pytest.raises(ConfigError, match="OUTBOX_TABLE"):
        LambdaEnvironment.load(env)


def test_the_api_key_is_never_printed_with_the_environment() -> None:
    loaded = LambdaEnvironment.load({**full_environment(), "ANTHROPIC_API_KEY": "sk-ant-secret"})
    assert "sk-ant-secret" not in repr(loaded)
    assert loaded.api_key() == "sk-ant-secret"


def test_the_sqlite_backend_needs_a_data_directory_and_no_tables() -> None:
    # Given the embedded backend chosen without a data directory / Then the error names it
    with pytest.raises(ConfigError, match="MEMWRITE_DATA_DIR"):
        LambdaEnvironment.load({"MEMWRITE_BACKEND": "sqlite"})
    # And with one, no table or queue variable is needed
    loaded = LambdaEnvironment.load({"MEMWRITE_BACKEND": "sqlite", "MEMWRITE_DATA_DIR": "/tmp/x"})
    assert str(loaded.sqlite_dir()) == "/tmp/x"


def test_an_unknown_backend_is_refused_naming_the_variable() -> None:
    with pytest.raises(ConfigError, match="MEMWRITE_BACKEND"):
        LambdaEnvironment.load({**full_environment(), "MEMWRITE_BACKEND": "postgres"})


def test_the_client_imports_only_httpx_pydantic_and_the_standard_library() -> None:
    # Given every module of `memwrite.client` (what `pip install "memwrite[client]"` runs)
    allowed_third_party = {"httpx", "pydantic"}
    for path in sorted((LIBRARY / "client").rglob("*.py")):
        for module in imported_modules(path):
            top = module.split(".")[0]
            # Then each import is the client's own, httpx, pydantic or the standard library
            assert (
                module.startswith("memwrite.client")
                or top in allowed_third_party
                or top in sys.stdlib_module_names
                or top == "__future__"
            ), f"{path.name} imports {module}"


# Each integration is its own extra: the client, pydantic and its one framework.
INTEGRATION_FRAMEWORKS = {
    "tools": set(),
    "langgraph": {"langgraph"},
    "strands": {"strands"},
    "openai_agents": {"agents"},
}


def test_each_integration_imports_the_client_and_its_own_framework_only() -> None:
    # Given every module of `memwrite.integrations`
    modules = {path.stem for path in (LIBRARY / "integrations").glob("*.py")} - {"__init__"}
    assert modules == set(INTEGRATION_FRAMEWORKS)
    for name, frameworks in INTEGRATION_FRAMEWORKS.items():
        for module in imported_modules(LIBRARY / "integrations" / f"{name}.py"):
            top = module.split(".")[0]
            # Then each import is the client, the shared tools, pydantic, its framework or
            # the standard library: installing one extra is enough to import it
            assert (
                module.startswith(("memwrite.client", "memwrite.integrations.tools"))
                or top in frameworks | {"pydantic", "__future__"}
                or top in sys.stdlib_module_names
            ), f"integrations/{name}.py imports {module}"


def test_importing_the_client_loads_no_server_dependency() -> None:
    # When a fresh interpreter imports the client
    heavy = ["boto3", "botocore", "anthropic", "aws_lambda_powertools", "numpy", "faiss"]
    code = f"import sys, memwrite.client; print([m for m in {heavy!r} if m in sys.modules])"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    # Then none of the pipeline's dependencies came with it
    assert result.stdout.strip() == "[]"
